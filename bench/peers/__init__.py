"""PyTorch (eager, CPU) peers of the benchmark tasks in bench/tasks; run only when torch is installed."""
