"""One module per CLI command: options in, one library call, render out."""
