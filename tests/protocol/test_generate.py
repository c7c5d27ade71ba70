"""The committed schema tables and hot functions are what the generator makes from the specs."""
from __future__ import annotations

import os

import pytest

from protocol import generate


@pytest.mark.skipif(not os.path.isdir(generate.DEFAULT_SPECS),
                    reason="Kafka's JSON specs are not beside the project (../shared/kafka-protocol)")
def test_generated_files_are_up_to_date():
    messages = generate.build_tables(generate.DEFAULT_SPECS)
    expected = {
        "tables.py": generate.render_tables(messages),
        "hot.py": generate.render_hot(messages),
    }
    for name, text in expected.items():
        with open(os.path.join(generate.SCHEMA_DIR, name), encoding="utf-8") as f:
            assert f.read() == text, f"protocol/schema/{name} is stale: run python -m protocol.generate"


def test_tables_hold_facts_only():
    # No upstream prose ("about" texts) is committed: only names, types, versions, defaults.
    with open(os.path.join(generate.SCHEMA_DIR, "tables.py"), encoding="utf-8") as f:
        text = f.read()
    assert "'about'" not in text and "The topic name" not in text


def test_comment_stripping_keeps_urls_in_strings():
    assert generate.strip_comments('{"a": "http://x"} // c') == '{"a": "http://x"} '
