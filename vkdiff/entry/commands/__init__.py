"""``vkdiff`` subcommands, one module each, named as the command: ``add_parser(sub)`` adds its subparser (options,
help) to ``sub``, and ``run(args) -> int`` runs it with the parsed ``args`` and returns the exit code; every other name
is private. ``vkdiff.entry.cli`` lists the modules (in the order ``vkdiff --help`` shows them), builds the parser from
them and dispatches to them; it sets ``args.settings`` (the run's settings) and ``args.argv`` (the words after the
command's name) before ``run``."""
