"""The text space of every cuda_gym env: printable ASCII, empty allowed, safe in async vector envs."""

from __future__ import annotations

import multiprocessing as mp
import string
from collections.abc import Iterator, Sequence
from ctypes import c_int32
from multiprocessing.sharedctypes import SynchronizedArray
from types import ModuleType
from typing import Any, overload

import numpy as np
from gymnasium.spaces import Text
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory


class PrintableText(Text):
    """``Text(max_length, min_length=0, charset=string.printable)``.

    Behaves exactly like :class:`gymnasium.spaces.Text` (it *is* one: SB3, skrl and the env checker
    see a ``Text``) with one difference: ``AsyncVectorEnv`` with its default ``shared_memory=True``
    returns the current strings. Gymnasium decodes a ``Text`` shared buffer once, when the vector
    env is built, so every later ``reset``/``step`` would return those first (stale) strings; for
    this space the shared buffer is read at every access instead (see :class:`SharedTexts`).
    ``shared_memory=False`` works too and is cheaper for very long strings.
    """

    def __init__(self, max_length: int, *, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(max_length, min_length=0, charset=string.printable, seed=seed)

    def __repr__(self) -> str:
        return f"PrintableText({self.max_length})"


class SharedTexts(Sequence[str]):
    """A live, read-only view of the strings an ``AsyncVectorEnv`` keeps in shared memory.

    ``AsyncVectorEnv`` returns ``deepcopy(observations)`` by default (``copy=True``): a deep copy
    of this view is a plain ``tuple[str, ...]`` of the strings in the buffer at that moment. With
    ``copy=False`` the view itself is returned; indexing it always reads the current strings.
    """

    def __init__(self, space: Text, buffer: SynchronizedArray, n: int) -> None:
        self._space = space
        self._buffer = buffer
        self._n = n
        self._chars = np.array(space.character_list + ("",), dtype=object)

    def _decode(self, index: int) -> str:
        data = np.frombuffer(self._buffer.get_obj(), dtype=np.int32)  # type: ignore[call-overload]
        row = data[index * self._space.max_length : (index + 1) * self._space.max_length]
        valid = row[row < len(self._space.character_set)]
        return "".join(self._chars[valid])

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if isinstance(index, slice):
            return tuple(self._decode(i) for i in range(self._n)[index])
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(f"index {index} out of range for {self._n} environments")
        return self._decode(index)

    def __iter__(self) -> Iterator[str]:
        return (self._decode(i) for i in range(self._n))

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (tuple, list, SharedTexts)) else other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_shared_memory.register(PrintableText)
def _create_printable_shared_memory(space: PrintableText, n: int = 1, ctx: ModuleType = mp) -> SynchronizedArray:
    return ctx.Array(np.dtype(np.int32).char, n * space.max_length)


@read_from_shared_memory.register(PrintableText)
def _read_printable_shared_memory(
    space: PrintableText, shared_memory: SynchronizedArray[c_int32], n: int = 1
) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)
