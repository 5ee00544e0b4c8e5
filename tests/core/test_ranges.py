"""Numbers read from text (hetsched.core.ranges): ASCII digits only, and each range stated
one way (``Range.expected``) wherever it is checked."""

from __future__ import annotations

import pytest

from hetsched.core.errors import InputError
from hetsched.core.ranges import SEED_RANGE, Range, check_seed, text_float, text_int
from hetsched.core.settings import (
    COUNT_RANGE,
    FRACTION_RANGE,
    IDLE_SECONDS_RANGE,
    LOAD_RANGE,
    PERIOD_RANGE,
    TIME_LIMIT_RANGE,
    ReplaySettings,
)
from hetsched.core.sharing import COLOCATION_FACTOR_RANGE, CoLocationModel

#: Text Python's float() and int() read as numbers that no format hetsched reads writes:
#: an Arabic-Indic 3 (U+0663), a full-width 8 (U+FF18), '_' separators; and the words
#: float() reads.
NOT_ASCII_NUMBERS = ("\u0663", "\uff18", "1_000", "1_0.5")
WORDS = ("nan", "NaN", "inf", "-inf", "Infinity")


@pytest.mark.parametrize("text", [*NOT_ASCII_NUMBERS, *WORDS, "1e999", "", " ", "0x10",
                                  "1,5", "one"])
def test_text_float_reads_finite_ascii_numbers_only(text: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        text_float(text)


def test_text_float_and_text_int_read_what_the_formats_write() -> None:
    assert [text_float(t) for t in ("4", " 4 ", "-2.5", ".5", "4.", "+1e3", "1E-3")] == \
        [4.0, 4.0, -2.5, 0.5, 4.0, 1000.0, 0.001]
    assert [text_int(t) for t in ("4", " 12 ", "-3", "+7")] == [4, 12, -3, 7]
    for text in (*NOT_ASCII_NUMBERS, "4.0", "1e3", "nan", ""):
        with pytest.raises(ValueError, match="not an integer in ASCII digits"):
            text_int(text)


def test_each_range_is_written_one_way() -> None:
    assert COLOCATION_FACTOR_RANGE.expected == "a number > 0 and <= 1"
    assert FRACTION_RANGE.expected == "a number from 0 to 1"
    assert LOAD_RANGE.expected == "a number from 0.001 to 1,000"
    assert IDLE_SECONDS_RANGE.expected == "seconds from 0 to 86,400"
    assert TIME_LIMIT_RANGE.expected == "seconds > 0 and <= 1e+10"
    assert PERIOD_RANGE.expected == "seconds >= 1"
    assert COUNT_RANGE.expected == "an integer >= 1"
    assert SEED_RANGE.expected == "an integer from 0 to 2,147,483,647"
    assert Range(None, 5).expected == "a number <= 5"
    assert Range().expected == "a finite number"


def test_a_range_admits_finite_numbers_inside_it_only() -> None:
    assert 1 in COLOCATION_FACTOR_RANGE
    assert 0.5 in COLOCATION_FACTOR_RANGE
    for value in (0, 0.0, -1, 1.5, float("nan"), float("inf"), True, "0.5", None):
        assert value not in COLOCATION_FACTOR_RANGE, value
    assert 3 in COUNT_RANGE
    assert 3.0 not in COUNT_RANGE
    assert 10**30 in COUNT_RANGE
    assert float("inf") not in Range()


def test_range_read_names_the_text_and_the_range() -> None:
    assert LOAD_RANGE.read("2", "--load", "bad load") == 2.0
    assert COUNT_RANGE.read("3", "--limit-jobs", "bad job limit") == 3
    for text in ("\u0663", "1_0", "nan", "5000"):
        with pytest.raises(InputError) as error:
            LOAD_RANGE.read(text, "--load", "bad load")
        assert str(error.value) == f"--load: bad load (got {text!r}; expected a number " \
            "from 0.001 to 1,000)"


def test_the_colocation_factor_has_one_message_wherever_it_is_checked() -> None:
    # Once: "a number from 0 to 1" for -1 and "a number in (0, 1]" for 0 (click's), and "a
    # speed factor > 0 and <= 1" from the settings.
    messages = set()
    for value in (-1, 0, 0.0, 1.5, float("nan")):
        for make in (lambda v: ReplaySettings(colocation_factor=v),
                     lambda v: CoLocationModel(default_factor=v)):
            with pytest.raises(InputError) as error:
                make(value)
            messages.add(error.value.expected)
    assert messages == {"a number > 0 and <= 1"}


def test_a_seed_is_checked_against_its_range() -> None:
    assert check_seed(7) == 7
    with pytest.raises(InputError, match=r"seed: bad seed \(got -1; expected an integer from "
                       r"0 to 2,147,483,647\)"):
        check_seed(-1)
