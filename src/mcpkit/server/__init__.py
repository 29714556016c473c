"""The server framework."""

from .app import MCPServer
from .context import Context, Elicit, InputRequest, ListRoots, Sample
from .prompts import AssistantMessage, UserMessage
from .results import Audio, File, Image

__all__ = [
    "AssistantMessage",
    "Audio",
    "Context",
    "Elicit",
    "File",
    "Image",
    "InputRequest",
    "ListRoots",
    "MCPServer",
    "Sample",
    "UserMessage",
]
