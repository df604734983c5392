"""gateway.integers: one rule for every integer parsed from text the gateway did not write."""

import pytest

from gateway.integers import ascii_int


@pytest.mark.parametrize("text", ["²", "١٢", " 12", "12 ", "1_000", "+1", "", "1e3", "0x10",
                                  "9" * 19, b"\xd9\xa1", "-1", "\uff11\uff12"])
def test_refuses_everything_but_ascii_digits(text: str | bytes) -> None:
    assert ascii_int(text) is None


@pytest.mark.parametrize(("text", "value"),
                         [("0", 0), ("012", 12), (b"42", 42), ("9" * 18, 10**18 - 1)])
def test_reads_ascii_digits(text: str | bytes, value: int) -> None:
    assert ascii_int(text) == value


def test_signed_takes_a_leading_minus_only_when_asked() -> None:
    assert ascii_int("-5", signed=True) == -5
    assert ascii_int("--5", signed=True) is None
    assert ascii_int(None) is None
