"""The graph core: dims, the node table, arenas, expressions, the executor, the automatic batching
engine and the device interface. Device-neutral: values are reached through a Device."""
