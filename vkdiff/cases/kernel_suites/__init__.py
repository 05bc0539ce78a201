"""One module per kernel family: its case grid and how its arguments are drawn (``register_test_suite``)."""
