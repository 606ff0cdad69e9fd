"""``.proto`` text to proto-schema-parser's syntax tree, with number literals kept as written.

proto-schema-parser reads an option's or default's number into a Python ``int`` or ``float``
(``1.50`` becomes ``1.5``, ``1e3`` becomes ``1000.0``) and leaves a hexadecimal one as a string,
so ``0x10`` and ``"0x10"`` look alike. Confluent's registry prints such a number as written (Wire
keeps the literal), so this parser's numbers are ``Int`` and ``Float``: the value, and the
literal in ``.literal``. Everything else is proto-schema-parser's own.
"""

from __future__ import annotations

from typing import Any

from antlr4 import CommonTokenStream, InputStream
from proto_schema_parser import ast
from proto_schema_parser.antlr.ProtobufLexer import ProtobufLexer
from proto_schema_parser.antlr.ProtobufParser import ProtobufParser
from proto_schema_parser.parser import Parser, _ASTConstructor


class Int(int):
    """An integer literal: its value, and ``literal`` as written (``0x10``, ``-3``, ``010``)."""

    literal: str

    def __new__(cls, value: int, literal: str) -> Int:
        made = super().__new__(cls, value)
        made.literal = literal
        return made


class Float(float):
    """A floating-point literal: its value, and ``literal`` as written (``1.50``, ``1e3``)."""

    literal: str

    def __new__(cls, value: float, literal: str) -> Float:
        made = super().__new__(cls, value)
        made.literal = literal
        return made


def _integer(literal: str) -> int:
    text = literal.lstrip("+-")
    sign = -1 if literal.startswith("-") else 1
    if text[:2] in ("0x", "0X"):
        return sign * int(text[2:], 16)
    if len(text) > 1 and text.startswith("0"):
        return sign * int(text, 8)
    return sign * int(text)


class _Constructor(_ASTConstructor):
    def visitScalarValue(self, ctx: Any) -> Any:  # noqa: N802 (ANTLR's name)
        if ctx.intLiteral():
            literal = self._getText(ctx.intLiteral())
            try:
                return Int(_integer(literal), literal)
            except ValueError:
                return super().visitScalarValue(ctx)
        if ctx.floatLiteral():
            literal = self._getText(ctx.floatLiteral())
            value = super().visitScalarValue(ctx)
            return Float(float(value), literal) if isinstance(value, (int, float)) else value
        return super().visitScalarValue(ctx)


class LiteralParser(Parser):
    """proto-schema-parser's Parser, building its tree with number literals kept."""

    def parse(self, text: str) -> ast.File:
        lexer = ProtobufLexer(InputStream(text))
        if self.setup_lexer:
            self.setup_lexer(lexer)
        parser = ProtobufParser(CommonTokenStream(lexer))
        if self.setup_parser:
            self.setup_parser(parser)
        tree: ast.File = _Constructor().visit(parser.file_())
        return tree
