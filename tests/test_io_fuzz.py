"""Fuzzing the three loaders: whatever a document or a file holds, loading it either
succeeds or raises ``ValueError`` naming a field (documents) or the file (files).

The default suite runs a fixed (derandomized) set of examples; set
``PLACEGYM_FUZZ_EXAMPLES=5000`` for a longer, randomized search.
"""

import copy
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_io import CLUSTER, GRAPH, PLACEMENT

from placegym.envs import load_cluster, load_graph, load_placement

LOADERS = {
    "graph": (load_graph, GRAPH),
    "cluster": (load_cluster, CLUSTER),
    "placement": (load_placement, PLACEMENT),
}
#: What an error about a document starts with: a top-level field, with its sub-path.
FIELD = re.compile(
    r"^(format|name|nodes|edges|op|spec|out_bytes|param_bytes|layer|devices|levels"
    r"|level_matrix|device|order|graph|cluster|placement)(\[\d+\])*(\.[a-z_]+(\[\d+\])*)*: "
)
HUGE = [10**400, -(10**400), 2**63, -(2**63) - 1, 2**64, 10**25]
VALUES = st.one_of(
    st.integers(-5, 2**40),
    st.sampled_from(HUGE),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.lists(st.integers(-3, 8), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(-3, 8), max_size=2),
)
SEARCH = os.environ.get("PLACEGYM_FUZZ_EXAMPLES")
SETTINGS = settings(
    max_examples=int(SEARCH or 120),
    deadline=None,
    derandomize=SEARCH is None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _slots(obj, out=None):
    """Every (container, key) of a nested dict/list document, the root's children first."""
    out = [] if out is None else out
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for key, value in items:
        out.append((obj, key))
        if isinstance(value, dict | list) and value:
            _slots(value, out)
    return out


@st.composite
def mutated(draw, doc):
    """``doc`` after 1-3 edits: a value replaced (wrong type, sign, NaN/inf, huge int),
    a key deleted, or an unknown key added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(doc)
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        edit = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if edit == "replace":
            container[key] = draw(VALUES)
        elif edit == "delete":
            del container[key]
        elif isinstance(container, dict):
            container[draw(st.text(min_size=1, max_size=6))] = draw(VALUES)
        else:
            container.append(draw(VALUES))
    return doc


@st.composite
def file_bytes(draw, doc):
    """The bytes of a mutated document, then maybe truncated, corrupted or replaced."""
    data = json.dumps(draw(mutated(doc))).encode()
    how = draw(st.sampled_from(["as is", "truncate", "flip", "insert", "random"]))
    if how == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif how in ("flip", "insert"):
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + draw(st.binary(min_size=1, max_size=3)) + data[i + (how == "flip") :]
    elif how == "random":
        data = draw(st.binary(max_size=64))
    return data


def _load_or_explain(loader, source):
    """Load ``source``; return None on success, else the ValueError's message."""
    try:
        loader(source)
    except ValueError as e:
        assert "\n" not in str(e), str(e)
        return str(e)
    return None


@pytest.mark.parametrize("kind", LOADERS)
def test_mutated_documents_load_or_name_a_field(kind):
    loader, doc = LOADERS[kind]

    @SETTINGS
    @given(mutated(doc))
    def check(bad):
        message = _load_or_explain(loader, bad)
        assert message is None or FIELD.match(message), message

    check()


@pytest.mark.parametrize("kind", LOADERS)
def test_mutated_files_load_or_name_the_file(kind, tmp_path_factory):
    loader, doc = LOADERS[kind]
    path = tmp_path_factory.mktemp(kind) / f"{kind}.json"

    @SETTINGS
    @given(file_bytes(doc))
    def check(data):
        path.write_bytes(data)
        message = _load_or_explain(loader, path)
        assert message is None or message.startswith(f"{path}: "), message

    check()
