"""BFCL's pure scoring: the agents' answers and a row's schemas and possible answers in, a reward
with named components and BFCL's AST match out (`native` for BFCL-v0, `multiturn` for
BFCLMultiTurn-v0).

Reference quirks kept: a gold accepted value that is itself a list (`multiples: [[3, 5]]`) offers
its items, never the list (87 of the 400 parallel rows have one); BFCL's optional-parameter marker
`""` is an accepted value like any other, so leaving the parameter out loses its credit; calls are
de-duplicated on lower-cased keys, so calls that differ only in case collapse and a gold that
repeats an identical call cannot be matched in full. Multi-turn only: ordered credit needs agent
0's calls first in the gold order, and a step with one gold call cannot reach the maximum (one
agent is lazy, or the two overlap); its AST metric is this suite's ordered match (BFCL scores
multi-turn by execution).
"""

from collabzoo.tasks.bfcl.rewards.ast_match import AstVerdict, ast_match, ordered_ast_match
from collabzoo.tasks.bfcl.rewards.matching import CallTask, GoldCall, gold_calls, similarity
from collabzoo.tasks.bfcl.rewards.multiturn import MULTITURN_MAX, MultiTurnRules, score_multiturn
from collabzoo.tasks.bfcl.rewards.native import (
    NATIVE_MAX,
    SELF_DUPLICATE_MODES,
    CallScore,
    NativeRules,
    decoded,
    score_native,
)
from collabzoo.tasks.bfcl.rewards.parsing import (
    STRING_ARGUMENTS,
    ParsedCalls,
    ToolCall,
    call_text,
    canonical_value,
    dedupe,
    parameter_order,
    parse_calls,
)

__all__ = [
    "MULTITURN_MAX",
    "NATIVE_MAX",
    "SELF_DUPLICATE_MODES",
    "STRING_ARGUMENTS",
    "AstVerdict",
    "CallScore",
    "CallTask",
    "GoldCall",
    "MultiTurnRules",
    "NativeRules",
    "ParsedCalls",
    "ToolCall",
    "ast_match",
    "call_text",
    "canonical_value",
    "decoded",
    "dedupe",
    "gold_calls",
    "ordered_ast_match",
    "parameter_order",
    "parse_calls",
    "score_multiturn",
    "score_native",
    "similarity",
]
