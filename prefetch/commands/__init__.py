"""The CLI: one module per command. Options in, one library call, render out.

May import anything below it. Nothing below ``commands`` prints to the user's terminal.
"""
