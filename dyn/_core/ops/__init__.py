"""Operation families, named as dyn/ops/<family>.py: shape rules, argument checks, node constructors,
labels and automatic batching specs."""
