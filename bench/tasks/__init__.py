"""The DyNet paper's benchmark tasks (neulab/dynet-benchmark dynet-py), written with dyn."""
