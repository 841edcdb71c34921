"""Which engine the redactor picks by itself (none forced); Hyperscan stays optional."""

from __future__ import annotations

import subprocess
import sys

from sessionstore.redact.redactor import Redactor

MANY = [b"%03d-many-secret-value" % i for i in range(40)]


def make(*secrets: bytes) -> Redactor:
    r = Redactor()
    for s in secrets:
        r.add(s)
    return r


def test_hyperscan_is_chosen_for_many_secrets_the_prefilter_for_few() -> None:
    few = make(b"one-secret-value")._compile()
    many = make(*MANY)._compile()
    assert few.fast is None and few.detector is not None
    assert many.fast is not None and many.detector is None


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_importing_and_registering_does_not_import_hyperscan() -> None:
    code = (
        "import sys, sessionstore\n"
        "from sessionstore import Redactor\n"
        "r = Redactor(); r.add('one-secret-value')\n"
        "assert r.redact(b'a one-secret-value b') == b'a REDACTED b'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hyperscan'))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_without_hyperscan_many_secrets_redact_the_same() -> None:
    data = b" ".join(MANY[::-1]) + b" " + MANY[7].hex().encode()
    expected = make(*MANY).redact(data)
    assert expected == b" ".join([b"REDACTED"] * (len(MANY) + 1))
    code = (
        "import sys\n"
        "sys.modules['hyperscan'] = None  # what `import hyperscan` meets where it is missing\n"
        "from sessionstore import Redactor\n"
        f"r = Redactor()\nfor s in {MANY!r}: r.add(s)\n"
        "assert r._compile().fast is None\n"
        f"sys.stdout.buffer.write(r.redact({data!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
