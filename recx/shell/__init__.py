"""What the command line shows without loading torch: the stored catalogue of registered names, arguments and
defaults (`catalog.json`, and a cache of the installed plugins' names) and shell completion."""
