"""Returned document text is data, not instructions: control-token look-alikes are defused.

A poisoned document could contain the special tokens of chat templates (`<|im_start|>system`,
`[INST]`, `<<SYS>>`, `<start_of_turn>`, `</s>`) so that, pasted into a model's context by an
agent, it poses as a system or tool message. Every text that search, read and fetch return goes
through `neutralise`, which swaps the brackets of such tokens for look-alike characters that no
tokenizer maps to a control token (`<|` -> `<｜`, `<` -> `‹`, `[` -> `［`).

Each replacement is one code point for one code point, so a neutralised text has the same length
and the same line breaks as the stored one: character offsets and line ranges of citations and
read windows stay exact. Ordinary text (code, prose, HTML) is left alone: only the exact token
shapes of the common templates match. The stored revisions are unchanged.
"""

from __future__ import annotations

import re

# <|im_start|>, <|im_end|>, <|endoftext|>, <|system|>, <|eot_id|>, <|start_header_id|>, ...
_PIPE_TOKEN = re.compile(r"<\|[A-Za-z_][A-Za-z0-9_\-]{0,40}\|>")
# <s>, </s>, <start_of_turn>, <end_of_turn>, <system>, <user>, <assistant>, <im_start> ...
_ANGLE_TOKEN = re.compile(
    r"</?(?:s|system|user|assistant|tool|im_start|im_end|start_of_turn|end_of_turn)>",
    re.IGNORECASE,
)
# [INST], [/INST], [SYSTEM_PROMPT], [/SYSTEM_PROMPT], [TOOL_CALLS], [TOOL_RESULTS]
_SQUARE_TOKEN = re.compile(r"\[/?(?:INST|SYSTEM_PROMPT|TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS)\]")
# <<SYS>>, <</SYS>>
_SYS_TOKEN = re.compile(r"<</?SYS>>")

_PIPES = str.maketrans({"|": "\uff5c"})  # fullwidth vertical line
_ANGLES = str.maketrans({"<": "\u2039", ">": "\u203a"})  # single angle quotation marks
_SQUARES = str.maketrans({"[": "\uff3b", "]": "\uff3d"})  # fullwidth square brackets


def neutralise(text: str) -> str:
    """`text` with chat-template control tokens defused, same length, same line breaks."""
    if "<" not in text and "[" not in text:
        return text
    text = _PIPE_TOKEN.sub(lambda m: m.group(0).translate(_PIPES), text)
    text = _SYS_TOKEN.sub(lambda m: m.group(0).translate(_ANGLES), text)
    text = _ANGLE_TOKEN.sub(lambda m: m.group(0).translate(_ANGLES), text)
    return _SQUARE_TOKEN.sub(lambda m: m.group(0).translate(_SQUARES), text)
