"""Models of held-out packages that no construction site builds (wave 9): constructor arguments inferred from
`d_*` names, docstring descriptions, counts, list and Optional annotations, a validating decorator and a
`**kwargs` subclass; inputs a model declares (`describe_inputs()`), tabular rows and columns. Real torch,
real CLI subprocess runs of fixtures/trace/tabular_models.py and declared_forecaster.py."""

from __future__ import annotations

import pytest
from cli_support import REPO_ROOT, import_file, input_shapes, json_check

torch = pytest.importorskip("torch")

from reslint.trace.constructor_arguments import (  # noqa: E402
    NOT_INFERRED,
    constructor_parameters,
    convention,
    inferred_arguments,
    parameter_docs,
)
from reslint.trace.inputs import infer_inputs  # noqa: E402

TABULAR = "fixtures/trace/tabular_models.py"
FORECASTER = "fixtures/trace/declared_forecaster.py"


def load(path: str):
    return import_file(REPO_ROOT / path, path.rsplit("/", 1)[-1].removesuffix(".py") + "_heldout_fixture")


def test_the_full_check_builds_and_traces_every_model_of_the_fixtures():
    document = json_check(TABULAR)
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [
        ("TabularMLP", True), ("TabularResNet", True), ("TabularTransformer", True)]
    assert document["findings"] == []
    [model] = document["models"]
    assert model["built_from"] == "inferred arguments (categories=(10, 10), num_continuous=2, dim=32, depth=2, heads=4)"
    assert "inputs: x_categ=long[2,2]<2; x_cont=float[2,2] (inferred from categorical and continuous columns of a " \
           "tabular model)" in model["notes"]
    document = json_check(FORECASTER)
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [
        ("FeedForwardForecaster", True), ("SoftmaxForecaster", True)]
    assert document["findings"] == []


@pytest.mark.parametrize(("name", "value"), [
    ("d_in", 32), ("d_block", 32), ("ffn_d_hidden", 64), ("d_hidden", 32), ("d_embedding", 32), ("d_hidden_multiplier", 2),
    ("prediction_length", 8), ("patch_len", 4), ("cat_cardinalities", (10, 10)), ("categories", (10, 10)),
    ("cardinality", 256), ("embedding_dimension", 32), ("num_hidden_nodes", 32),
])
def test_dimension_horizon_and_category_names_give_small_values(name, value):
    assert convention(name, image_model=False) == value


def test_keyword_only_d_names_a_docstring_and_an_optional_annotation_are_enough_to_build():
    module = load(TABULAR)
    assert inferred_arguments(module.TabularMLP, vars(module)) == (
        {"d_in": 32, "d_out": 32, "n_blocks": 2, "d_block": 32, "dropout": 0.0}, ["n_blocks"])
    # `stages` and `breadth` follow no name convention: their docstring lines say a depth and a width
    assert inferred_arguments(module.TabularResNet, vars(module)) == (
        {"d_in": 32, "d_out": 32, "stages": 2, "breadth": 32, "d_hidden_multiplier": 2.0, "dropout": 0.0}, ["stages"])
    forecaster = load(FORECASTER)
    arguments, _ = inferred_arguments(forecaster.FeedForwardForecaster, vars(forecaster))
    # lists of sizes are lists (the validating decorator rejects a tuple or an int), `scaling: Optional[str]` None,
    # the number of static categories is the list's length
    assert arguments == {"context_length": 32, "prediction_length": 8, "hidden_dimensions": [32, 32],
                         "cardinality": [256, 256], "scaling": None}
    forecaster.FeedForwardForecaster(**arguments)


def test_a_subclass_passing_args_and_kwargs_on_takes_its_bases_required_arguments():
    forecaster = load(FORECASTER)
    names = [parameter.name for parameter in constructor_parameters(forecaster.SoftmaxForecaster)]
    assert names == ["use_softmax", "context_length", "prediction_length", "hidden_dimensions", "cardinality",
                     "scaling", "batch_norm"]


def test_docstring_styles_give_descriptions_and_types():
    class Documented(torch.nn.Module):
        """A module.

        Parameters
        ----------
        layers : list
            List of encoder layers.
        horizon
            Number of time points to predict.
        """

        def __init__(self, layers, horizon, breadth, stages):
            """
            Args:
                breadth (int): the block width.
                stages: the number of residual blocks.
            """
            super().__init__()

    docs = parameter_docs(Documented)
    assert {name: docs[name] for name in ("layers", "horizon", "breadth", "stages")} == {
        "layers": "List of encoder layers.", "horizon": "Number of time points to predict.",
        "breadth": "the block width.", "stages": "the number of residual blocks."}
    assert parameter_docs(Documented, types=True)["layers"] == "list"
    assert parameter_docs(Documented, types=True)["breadth"] == "int"
    # `layers` named like a depth but documented as a list of layers: not guessed, so not built from an int
    assert inferred_arguments(Documented, {}) is None
    assert convention("layers", image_model=False) == 2

    class Windowed(torch.nn.Module):
        def __init__(self, dim, window_size):
            """
            Args:
                dim (int): Number of input channels.
                window_size (tuple[int]): The height and width of the window.
            """
            super().__init__()

    assert inferred_arguments(Windowed, {}) == ({"dim": 32, "window_size": (4, 4)}, [])  # a pair, as documented


def test_a_class_annotation_of_a_class_parameter_is_the_value():
    class Head(torch.nn.Module):
        def __init__(self, dim: int, activation_class: torch.nn.ReLU):
            super().__init__()
            self.layers = torch.nn.Sequential(torch.nn.Linear(dim, dim), activation_class())

    assert inferred_arguments(Head, {"torch": torch}) == ({"dim": 32, "activation_class": torch.nn.ReLU}, [])
    assert convention("activation_class", image_model=False) is NOT_INFERRED


def test_declared_inputs_come_first_sized_by_the_batch():
    forecaster = load(FORECASTER)
    model = forecaster.FeedForwardForecaster(context_length=24, prediction_length=4, hidden_dimensions=[16],
                                             cardinality=[3, 5], scaling=None)
    inputs = infer_inputs(model.eval(), "cpu")
    assert input_shapes(inputs) == {"past_target": ((2, 24), "float32"), "past_observed_values": ((2, 24), "float32"),
                              "feat_static_cat": ((2, 2), "int64")}
    assert int(inputs.kwargs["feat_static_cat"].abs().sum()) == 0  # zeros: a valid index of any table
    assert "(inferred from FeedForwardForecaster.describe_inputs)" in inputs.description


def test_tabular_columns_and_rows():
    module = load(TABULAR)
    model = module.TabularTransformer(categories=(3, 4, 5), num_continuous=6, dim=16, depth=1, heads=2)
    assert input_shapes(infer_inputs(model.eval(), "cpu")) == {"x_categ": ((2, 3), "int64"),
                                                              "x_cont": ((2, 6), "float32")}
    # a BatchNorm1d after the first projection: rows (batch, features), not (batch, time, features)
    resnet = module.TabularResNet(d_in=7, d_out=1, stages=1, breadth=8, d_hidden_multiplier=2.0, dropout=0.0)
    assert input_shapes(infer_inputs(resnet.eval(), "cpu")) == {0: ((2, 7), "float32")}


def test_a_base_whose_forward_only_documents_itself_is_built_as_a_subclass():
    class Passing(torch.nn.Module):  # torch-geometric's MessagePassing: a forward with a docstring only
        def forward(self, *args, **kwargs):
            """Runs the forward pass of the module."""

    class SimplePassing(Passing):
        def forward(self, x, edge_index):
            return x

    class GraphBlock(torch.nn.Module):
        def __init__(self, channels: int, conv: Passing):
            super().__init__()

    arguments, _ = inferred_arguments(GraphBlock, {"Passing": Passing, "int": int})
    assert repr(arguments["conv"]) == "SimplePassing()"
