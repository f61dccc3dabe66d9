"""BFCL's pure scoring: the agents' answers and a row's schemas and possible answers in, a reward
with named components and BFCL's AST match out."""

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
