"""The rule catalog: every public rule code with its name, default severity and summary.

Codes, names and default severities are public API (DESIGN.md); never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}

DOCS_URL = "https://github.com/reslint/reslint/blob/main/rules/{code}.md"


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    severity: str
    summary: str
    fix: str
    engine: str  # "static", "trace", "probe", "training" or "any"

    @property
    def doc_url(self) -> str:
        return DOCS_URL.format(code=self.code)


RULES: dict[str, RuleInfo] = {
    rule.code: rule
    for rule in [
        RuleInfo("RL001", "residual-shape-mismatch", "error",
                 "skip and branch of a residual add have different shapes and there is no projection on the skip path",
                 "make the branch return the skip's width, or put a projection (nn.Linear / 1x1 conv) on the skip path",
                 "any"),
        RuleInfo("RL002", "residual-broadcast", "error",
                 "skip and branch shapes differ but broadcast, so the add silently changes meaning",
                 "make both operands the same shape; broadcasting a residual add is almost never intended",
                 "trace"),
        RuleInfo("RL003", "dropout-on-skip-path", "warning",
                 "dropout applied to the identity path instead of the branch",
                 "apply dropout to the sublayer output before the add: x + dropout(sublayer(x))",
                 "any"),
        RuleInfo("RL101", "post-ln", "info",
                 "a block uses Post-LN, LayerNorm(x + Sublayer(x))",
                 "train with learning-rate warmup, or move the norm to the branch input (Pre-LN: x + Sublayer(LayerNorm(x)))",
                 "any"),
        RuleInfo("RL102", "mixed-norm-placement", "warning",
                 "blocks of one stack mix Pre-LN and Post-LN",
                 "use one placement for every residual of the stack",
                 "any"),
        RuleInfo("RL103", "missing-final-norm", "warning",
                 "a Pre-LN stack's output reaches the head or the model output without a final norm",
                 "apply a final LayerNorm/RMSNorm to the stack output before the head",
                 "any"),
        RuleInfo("RL104", "deep-post-ln", "warning",
                 "a Post-LN stack is deeper than deep-post-ln-layers without DeepNorm-style residual scaling",
                 "switch to Pre-LN, or scale the skip as in DeepNorm: LayerNorm(alpha * x + F(x))",
                 "any"),
        RuleInfo("RL201", "batchnorm-in-sequence-model", "warning",
                 "BatchNorm in a model that processes sequences",
                 "use nn.LayerNorm or nn.RMSNorm over the feature dimension",
                 "any"),
        RuleInfo("RL301", "post-ln-without-warmup", "warning",
                 "Post-LN model trained by code that has no learning-rate warmup",
                 "add a warmup schedule, or switch the model to Pre-LN",
                 "training"),
        RuleInfo("RL401", "norm-unbiased-variance", "warning",
                 "a hand-written LayerNorm/RMSNorm uses the unbiased (Bessel-corrected) variance",
                 "pass unbiased=False / correction=0, as nn.LayerNorm does",
                 "any"),
        RuleInfo("RL402", "norm-over-sequence", "error",
                 "a norm's statistics span the sequence/time axis, mixing positions",
                 "normalize over the feature dimension only (dim=-1, normalized_shape=d_model)",
                 "any"),
        RuleInfo("RL403", "norm-without-eps", "warning",
                 "a hand-written norm divides by std/sqrt(var) without an epsilon",
                 "add an epsilon inside the square root: torch.rsqrt(var + eps)",
                 "any"),
        RuleInfo("RL501", "ffn-without-activation", "warning",
                 "a feed-forward block stacks linear layers with no nonlinearity between them",
                 "put an activation (nn.GELU, nn.ReLU, SiLU gate) between the two linear layers",
                 "any"),
        RuleInfo("RL601", "vanishing-gradient", "warning",
                 "gradient norms shrink by orders of magnitude from the output side toward the input side",
                 "add residual connections, use Pre-LN, or fix the initialisation scale",
                 "probe"),
        RuleInfo("RL602", "exploding-gradient", "warning",
                 "gradients or activations grow by orders of magnitude with depth",
                 "lower the initialisation scale, add normalization, or scale the residual branches",
                 "probe"),
        RuleInfo("RL603", "non-finite-gradient", "error",
                 "NaN or Inf in a gradient or the loss",
                 "find the first parameter hit; check eps in norms, the loss, and the learning rate",
                 "probe"),
        RuleInfo("RL604", "parameter-without-gradient", "warning",
                 "a trainable parameter receives no gradient",
                 "call the module in forward, remove it, or set requires_grad=False",
                 "probe"),
        RuleInfo("RL901", "syntax-error", "error",
                 "a file cannot be parsed (syntax, encoding)",
                 "fix the syntax or encoding error; other files are still checked",
                 "any"),
        RuleInfo("RL902", "model-build-failed", "warning",
                 "a model could not be imported or constructed for tracing; static findings still reported",
                 "make the model constructible, or name a factory with --model FILE:EXPR",
                 "trace"),
        RuleInfo("RL903", "trace-failed", "info",
                 "tracing failed; static facts were used instead",
                 "pass example inputs with --inputs, or simplify data-dependent control flow",
                 "trace"),
        RuleInfo("RL904", "analysis-limit", "info",
                 "a file, or part of it, was not analysed: it went over one of reslint's limits (size, evaluation budget) or its check died",
                 "split the file or simplify the code the message names; other files and facts are still checked",
                 "any"),
        RuleInfo("RL905", "unused-noqa", "warning",
                 "a suppression comment names a code that matches no reslint rule, so it suppresses nothing",
                 "correct the code (reslint rules lists them) or remove it from the comment",
                 "any"),
    ]
}


def codes_matching(pattern: str) -> set[str]:
    """The codes one code or prefix names, as the CLI, the config and suppression comments read it:
    `RL101`, `RL1`, `RL` (every rule) or `ALL`; case-insensitive."""
    pattern = pattern.strip().upper()
    if pattern == "ALL":
        return set(RULES)
    return {code for code in RULES if pattern and code.startswith(pattern)}


def expand_codes(patterns: list[str] | tuple[str, ...]) -> set[str]:
    """Expand codes and prefixes (``RL1``, ``RL10``, ``ALL``) to full codes.

    Raises ValueError for a pattern that matches no rule, so a typo is never ignored.
    """
    selected: set[str] = set()
    for raw in patterns:
        if not raw.strip():
            continue
        matches = codes_matching(raw)
        if not matches:
            raise ValueError(f"unknown rule code or prefix: {raw!r}")
        selected.update(matches)
    return selected
