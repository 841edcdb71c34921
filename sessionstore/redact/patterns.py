"""Well-known token shapes (gitleaks' rules) for `Redactor(patterns=True)`.

Each pattern has a bounded match length so a streaming redactor can hold back
`MAX_MATCH_LEN - 1` bytes and still see every match whole. Matches are taken
at *every* start position (not leftmost-first), so the result for a byte
depends only on the bytes after it, which is what makes streaming output equal
whole-buffer output. No word boundaries are required: a false positive costs
a few redacted bytes, a missed boundary would cost a token.
"""

from __future__ import annotations

import re

# A PEM block longer than this is not recognised as a block (its BEGIN line and
# any individual lines still can be, if registered). The same bound applies to
# whole-buffer redaction so both modes agree.
PEM_MAX_BODY = 16 * 1024
_PEM_LABEL_MAX = 64
_SLACK_MAX_BODY = 250

PATTERNS: tuple[re.Pattern[bytes], ...] = tuple(
    re.compile(p)
    for p in (
        rb"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",  # AWS access key id
        rb"gh[pousr]_[A-Za-z0-9]{36}",  # GitHub classic tokens
        rb"github_pat_\w{82}",  # GitHub fine-grained tokens
        rb"hf_[A-Za-z]{34}",  # Hugging Face
        rb"xox[bpe]-[A-Za-z0-9-]{10,%d}" % _SLACK_MAX_BODY,  # Slack
        # PEM private key block, BEGIN line through END line
        rb"-----BEGIN [A-Z0-9 ]{0,%d}PRIVATE KEY-----" % _PEM_LABEL_MAX
        + rb"[\s\S]{0,%d}?" % PEM_MAX_BODY
        + rb"-----END [A-Z0-9 ]{0,%d}PRIVATE KEY-----" % _PEM_LABEL_MAX,
    )
)

# Longest possible match of any pattern above (the PEM block).
MAX_MATCH_LEN = 2 * (len("-----BEGIN ") + _PEM_LABEL_MAX + len("PRIVATE KEY-----")) + PEM_MAX_BODY

# Every pattern starts with one of these; a cheap search for them finds the
# only positions where a full match can start.
_START = re.compile(rb"A3T|AKIA|ASIA|ABIA|ACCA|gh[pousr]_|github_pat_|hf_|xox[bpe]-|-----BEGIN ")


def pattern_spans(buf: bytes, final: bool) -> list[tuple[int, int]]:
    """(start, end) of every pattern match starting at any position of `buf`.

    Unless `final`, starts closer than `MAX_MATCH_LEN` to the end are skipped:
    the match there may grow once more bytes arrive, so the caller holds those
    bytes back and asks again.
    """
    spans: list[tuple[int, int]] = []
    last_start = len(buf) if final else len(buf) - MAX_MATCH_LEN
    pos = 0
    while (m := _START.search(buf, pos)) is not None and m.start() <= last_start:
        start = m.start()
        for pattern in PATTERNS:
            if (full := pattern.match(buf, start)) is not None:
                spans.append((start, full.end()))
        pos = start + 1  # candidates may overlap ("ACCAKIA..."), so step one byte
    return spans
