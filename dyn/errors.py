"""dyn's own exception classes (exported as ``dyn.<name>``).

Everything else a user can get for bad input is a built-in class: TypeError
(wrong type), ValueError (bad value or shape), IndexError (index out of
range). See the "Errors" section of docs/core.md.

This module imports nothing from dyn, so the compiled core can import it.
"""

from __future__ import annotations


class StaleExpressionError(ValueError, RuntimeError):
    """An expression of an earlier graph was used after ``renew_cg()``, or one
    dropped by ``cg_revert()``.

    It is both a ValueError (what DyNet raises when a stale expression is an
    operation's argument) and a RuntimeError (what DyNet raises when one is
    evaluated), so code written for either keeps working.
    """


__all__ = ["StaleExpressionError"]
