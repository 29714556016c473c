"""The server framework."""

from .app import MCPServer
from .context import Context
from .prompts import AssistantMessage, UserMessage
from .results import Audio, File, Image

__all__ = ["AssistantMessage", "Audio", "Context", "File", "Image", "MCPServer", "UserMessage"]
