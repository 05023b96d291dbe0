"""The constants of the token estimates: what a message costs beyond its characters, and the bounds of
the tokens-per-character ratio that `Conversation` calibrates from the server's reports and counts."""

DEFAULT_TOKENS_PER_CHAR = 0.25
"""The ratio before any report or count (about four characters a token)."""
MESSAGE_TOKENS = 5
"""Tokens a chat template adds around each message (ChatML and Llama 3 use 5, OpenAI about 4)."""
TOKENS_PER_CHAR_RANGE = (0.05, 4.0)
"""The ratios believed: a report or count outside is clamped into it. No tokenizer makes more tokens than
the text has UTF-8 bytes (four at most a character): Chinese or emoji through a byte-level vocabulary
trained on English take two or three tokens a character, and a count saying so is honest."""
