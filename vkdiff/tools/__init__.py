"""Tools that use the house but are not a run of it: what vkdiff covers of a tree, loading every shader variant on
a device, and how often a verdict catches a planted fault."""
