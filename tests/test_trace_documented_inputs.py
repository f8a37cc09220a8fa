"""A forward that takes a bundle of inputs (a dataclass or TypedDict of tensors), as transformers' EsmFold2 does:
the inputs come from the shapes the docstrings give, sized from the config; what the model one-hot encodes
itself is given as indices; a refinement loop over the same layers is traced once.
fixtures/trace/dataclass_inputs.py mirrors it; the EsmFold2 test reads the real class (built on meta, not traced)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402
from reslint.trace.inputs import candidate_inputs, infer_candidates  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "dataclass_inputs.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


def test_bundled_inputs_are_made_from_the_docstrings(traced):
    result, captures = traced
    assert result.findings == [] and "FoldModel" not in result.static_only
    assert sorted(captures) == ["FoldModel", "PairModel"]
    fold = captures["FoldModel"]
    assert fold.method == "export"
    assert fold.inputs.startswith(
        "token_index=long[2,16]; attention_mask=bool[2,16]; atom_inputs=AtomInputs(positions=float[2,16,3], "
        "atom_mask=bool[2,16], element=long[2,16]<10, atom_to_token=long[2,16])")
    assert captures["PairModel"].inputs.startswith("token_index=long[2,16]; pairs=PairInputs(pair_features=float[2,16,16,4])")


def test_the_refinement_loop_is_traced_once(traced):
    fold = traced[1]["FoldModel"]
    assert ("num_loops", 6, 1) in fold.reduction
    linears = [node for node in fold.graph_module.graph.nodes if node.target == torch.ops.aten.linear.default]
    assert len(linears) == 1 + 2  # the atom projection and one pass over the two blocks


def test_esmfold2_gets_its_atom_inputs_as_the_raw_featurizer_gives_them():
    modeling = pytest.importorskip("transformers.models.esmfold2.modeling_esmfold2")
    from reslint.trace.models import ModelSpec, reduced_builder

    spec = ModelSpec("EsmFold2Model", 1, lambda: None, cls=modeling.EsmFold2Model)
    with torch.device("meta"):
        model = reduced_builder(modeling.EsmFold2Model, spec)()
    assert ("num_loops", 10, 1) in spec.reduction
    inputs = candidate_inputs(infer_candidates(model)[0], "cpu")
    atoms = inputs.kwargs["atom_inputs"]
    assert isinstance(atoms, modeling.EsmFold2AtomInputs)
    shapes = {field.name: (tuple(getattr(atoms, field.name).shape), getattr(atoms, field.name).dtype)
              for field in dataclasses.fields(atoms)}
    assert shapes == {"ref_pos": ((2, 16, 3), torch.float32), "ref_charge": ((2, 16), torch.float32),
                      "atom_attention_mask": ((2, 16), torch.bool), "ref_element": ((2, 16), torch.int64),
                      "ref_atom_name_chars": ((2, 16, 4), torch.int64), "ref_space_uid": ((2, 16), torch.int64),
                      "atom_to_token": ((2, 16), torch.int64)}
    assert int(atoms.ref_element.max()) < 128 and int(atoms.ref_atom_name_chars.max()) < 64
    assert int(inputs.kwargs["res_type"].max()) < 33 and tuple(inputs.kwargs["token_bonds"].shape) == (2, 16, 16, 1)
