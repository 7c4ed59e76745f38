"""The one stderr line of an error, safe to show whatever the user typed or pasted.

A message quotes what it was given: a name pasted from a web page with a trailing ``\\r``,
a non-breaking space or a zero-width character, bytes that are not UTF-8, a 100 KB value, a
URL with ``user:password@``. Shown as they are, these break the one line (``\\r`` and ``\\n``
start another; ``\\x1b`` drives the terminal), hide what is wrong (``'mnist\\u200b'`` looks
like ``'mnist'``), fill the cell, or print a password back. :func:`error_line` makes the
message one visible line: such characters escaped, each overlong word shortened in the
middle, the password of a ``scheme://user:password@`` replaced by ``***``.
"""

from __future__ import annotations

import re

# ``scheme://user:password@``: the password (up to the last ``@`` before the host's end). Each
# match starts at a ``://`` (linear in the message's length, whatever it quotes).
_CREDENTIALS = re.compile(r"(://[^\s/:@'\"`]*):[^\s/'\"`]*@")
# Characters that are not themselves on a line: controls, format (zero-width, bidi), separators
# other than the space, surrogates (undecodable bytes of a command line), noncharacters.
_ODD = re.compile("[^\x20-\x7e\u00a1-\u00ac\u00ae-\u1fff\u2010-\u2027\u2030-\u205e\u2070-\u2fff"
                  "\u3001-\ud7ff\ue000-\ufdcf\ufdf0-\ufefe\uff00-\ufff8\U00010000-\U0010ffff]")
LONGEST_WORD = 300


def error_line(message: str) -> str:
    """``message`` as one line that shows what it quotes and never a password."""
    message = hide_passwords(message)
    message = " ".join(message.split("\n"))  # (a message's own line breaks: one line)
    message = _ODD.sub(_escape, message)
    if len(message) > LONGEST_WORD:
        message = re.sub(r"\S{%d,}" % (LONGEST_WORD + 1), _shorten, message)
    return message


def hide_passwords(text: str) -> str:
    """``text`` with each ``scheme://user:password@`` as ``scheme://user:***@`` (a report's URLs:
    a private index's token in ``PIP_INDEX_URL``, a mirror's in mirrors.toml)."""
    if "://" not in text:
        return text
    return _CREDENTIALS.sub(lambda m: m.group() if m.group() == _EXAMPLE else m.group(1) + ":***@", text)


_EXAMPLE = "://USER:PASSWORD@"  # a hint's example of where credentials go (the 407 error's), not a secret


def _escape(match: re.Match) -> str:
    """Controls and undecodable bytes as a server's text shows them (``net.failures.shown_char``);
    the other odd characters (zero-width, bidi, separators) as ``\\uXXXX``."""
    from prefetch.net.failures import shown_char

    char = match.group()
    shown = shown_char(char)
    if shown != char:
        return shown
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _shorten(match: re.Match) -> str:
    word = match.group()
    return f"{word[:120]}...({len(word)} characters)...{word[-60:]}"
