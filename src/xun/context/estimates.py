"""The constants of the token estimates: what a message costs beyond its characters, and the bounds of
the tokens-per-character ratio that `Conversation` calibrates from the server's reports and counts."""

DEFAULT_TOKENS_PER_CHAR = 0.25
"""The ratio before any report or count (about four characters a token)."""
MESSAGE_TOKENS = 5
"""Tokens a chat template adds around each message (ChatML and Llama 3 use 5, OpenAI about 4)."""
TOKENS_PER_CHAR_RANGE = (0.05, 1.0)
"""The ratios believed: a report or count outside is clamped into it."""
