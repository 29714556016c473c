"""The client."""

from .client import Client
from .dispatch import ClientHandlers
from .options import ClientOptions, InProcessServer
from .session import ClientSession
from .skills import Skill, SkillVerificationError
from .stdio import StdioServerParameters, stdio_client
from .tasks import TaskHandle

__all__ = [
    "Client",
    "ClientHandlers",
    "ClientOptions",
    "ClientSession",
    "InProcessServer",
    "Skill",
    "SkillVerificationError",
    "StdioServerParameters",
    "TaskHandle",
    "stdio_client",
]
