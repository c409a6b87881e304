"""Writing a user's files without ever destroying anything: the only place scalegp writes one.

Every file scalegp writes (model files, predictions, figures, experiment tables) goes
through :func:`write_atomically`, and the command line checks each output path with
:func:`check_output_path` / :func:`check_output_dir` before any long work starts.

Which targets are accepted
--------------------------
1. A regular file that the user may write is replaced; a path that does not exist yet is
   created. A folder, a device (``/dev/null``), a FIFO or a socket is refused untouched:
   only ``os.lstat`` looks at it. A read-only file is refused: one whose permission bits
   grant nobody writing (``chmod a-w``; checked on the bits, so also for root, whom
   ``os.access`` always allows) or that this process may not write.
   A default output, a path the user did not name (``replace=False``: ``scalegp demo``'s
   figure, ``scalegp experiment``'s folder), is only ever created: anything already at that
   path is refused untouched, and the file is moved into place by ``os.link``, which fails
   rather than replace a file that appeared meanwhile.
2. A symbolic link at the target is refused: scalegp never writes through a link and never
   replaces one (a link may point anywhere, e.g. one planted in a shared folder). Name the
   link's target instead. Links among the folders above the target are followed as usual.
3. The target must not be one of the inputs of the command (the data being read, the model
   being read), also not through another spelling, a symlink or a hard link: compared with
   ``os.path.samefile``.
4. The target's folder must exist and be writable, and the name must end in the writer's
   suffix, in any case: ``.npz`` for model files, ``.csv`` for predictions, ``.png`` for
   figures, ``.md`` for tables.

How a file is written
---------------------
The content goes to a new temporary file in the target's folder, created exclusively
(``O_CREAT | O_EXCL | O_NOFOLLOW``) under an unpredictable name,
``.NAME.HOST-PID-RANDOM.tmp`` (``RANDOM``: 64 bits from :mod:`secrets`), so a file or symlink
planted at any name is never opened or followed. The temporary file has the existing
target's permission bits (``rwx`` for user, group and others), or mode 0o666 less the umask
for a new file, as ``open`` gives; it is owned by the writer. It is flushed and fsync'ed, the
target is checked again, and ``os.replace`` moves it over the target: readers see the old
file or the complete new one, never a part. Other hard links to a replaced file keep the old
content.

Failures
--------
On any error or ``KeyboardInterrupt`` (SIGINT) the temporary file is removed and the target
is left as it was. SIGTERM and SIGHUP, while their handlers are the default ones and the
write runs in the main thread, first remove the temporary file and are then delivered as
usual (the process ends by that signal). A temporary file left by a process that could not
clean up (SIGKILL, power loss) is removed by the next write to the same target once its PID
is no longer alive on this host; the file of a live concurrent writer is kept. A refused
target raises :class:`~scalegp.errors.UnsafeOutputError` (a ``ValueError``), a failed write an
``OSError``; both name the user's path, never the temporary file.

A target swapped for something else by another process between the last check and the
``os.replace`` (a window of microseconds) is replaced as a name: ``os.replace`` never writes
into a device, a FIFO or a link's target.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import signal
import socket
import stat
import threading

from .errors import UnsafeOutputError

__all__ = ["check_output_path", "check_output_dir", "write_atomically", "MODEL_SUFFIXES",
           "CSV_SUFFIXES", "PNG_SUFFIXES", "MARKDOWN_SUFFIXES"]

MODEL_SUFFIXES = (".npz",)
CSV_SUFFIXES = (".csv",)
PNG_SUFFIXES = (".png",)
MARKDOWN_SUFFIXES = (".md",)

TEMPORARY_SUFFIX = ".tmp"
#: Characters of the target's name kept in a temporary name (which must stay under 255).
NAME_CHARACTERS = 120
#: Tags temporary names, so that only this host's dead writers are cleaned up.
HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
RANDOM_HEX_DIGITS = 16
CREATE_ATTEMPTS = 100
NEW_FILE_MODE = 0o666
#: The write permission bits of user, group and others: none set is a read-only file.
WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                            if hasattr(signal, name))

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


# ------------------------------------------------------------------------------ checks
def check_output_path(path, *, inputs=(), suffixes=None, what="--out",
                      replace: bool = True) -> str:
    """Refuse an output path that writing could destroy something through; see the module.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    inputs : iterable of str or os.PathLike
        Files the same run reads; the output must not be any of them.
    suffixes : tuple of str, optional
        Accepted endings of the file name (compared case-insensitively).
    what : str
        How the path is named in error messages (a CLI option or a parameter name).
    replace : bool
        False for a default output (a path the user did not name): an existing entry at the
        path is refused, whatever it is.

    Returns
    -------
    str
        The absolute path of the target (links among its folders not resolved).

    Raises
    ------
    UnsafeOutputError
        Naming ``path`` as given, what was expected and what was found.
    """
    text = os.fsdecode(os.fspath(path))
    shown = f"{what} {text!r}"
    name = os.path.basename(text)
    if not name or name in (".", ".."):
        raise UnsafeOutputError(f"{shown}: expected the path of a file, got "
                                f"{'a folder name' if text else 'an empty string'}")
    target = os.path.abspath(text)
    folder = os.path.dirname(target)
    folder_exists = os.path.isdir(folder)
    status = _lstat(target, shown) if folder_exists else None
    if status is not None and not replace:
        raise _exists_error(text, what)
    if status is not None:
        _check_replaceable(target, status, shown)
    if suffixes and not name.lower().endswith(tuple(s.lower() for s in suffixes)):
        raise UnsafeOutputError(f"{shown}: expected a file name ending in "
                                f"{' or '.join(suffixes)}, got {name!r}")
    if not folder_exists:
        found = "is not a folder" if os.path.lexists(folder) else "does not exist"
        raise UnsafeOutputError(f"{shown}: the folder {folder!r} {found}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UnsafeOutputError(f"{shown}: the folder {folder!r} is not writable")
    for source in inputs:
        if _same_file(target, os.fsdecode(os.fspath(source))):
            raise UnsafeOutputError(f"{shown}: is the input file {os.fspath(source)!r} of "
                                    "this command; writing it would destroy it, choose "
                                    "another output path")
    return target


def check_output_dir(path, *, what="--out-dir") -> str:
    """Check a folder that outputs will be written into: an existing writable folder (also
    through a symlink), or a missing one whose nearest existing parent is a writable folder.

    Returns the absolute path; the folder is not created. The files written into it are
    checked one by one by :func:`check_output_path`.
    """
    text = os.fsdecode(os.fspath(path))
    shown = f"{what} {text!r}"
    if not text:
        raise UnsafeOutputError(f"{what}: expected the path of a folder, got ''")
    target = os.path.abspath(text)
    existing = target
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        found = _kind(os.lstat(existing).st_mode) or "a file"
        where = "" if existing == target else f": its parent {existing!r}"
        raise UnsafeOutputError(f"{shown}{where} is {found}, expected a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == target else f" (cannot create it in {existing!r})"
        raise UnsafeOutputError(f"{shown}: the folder is not writable{where}")
    return target


def _lstat(target: str, shown: str):
    try:
        return os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UnsafeOutputError(f"{shown}: cannot be inspected ({error.strerror})") from None


def _kind(mode: int):
    """The name of a file type that is not a regular file, or None for a regular file."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def _check_replaceable(target: str, status: os.stat_result, shown: str) -> None:
    kind = _kind(status.st_mode)
    if kind == "a symbolic link":
        raise UnsafeOutputError(
            f"{shown}: is a symbolic link (to {os.readlink(target)!r}); scalegp never writes "
            f"through or replaces a link: name its target {os.path.realpath(target)!r} instead")
    if kind is not None:
        raise UnsafeOutputError(f"{shown}: is {kind}; scalegp replaces only a regular file "
                                "or creates a missing one")
    if not status.st_mode & WRITE_BITS or not os.access(target, os.W_OK):
        raise UnsafeOutputError(f"{shown}: is a read-only file; scalegp does not replace a "
                                "file you cannot write (make it writable or remove it first)")


def _exists_error(text: str, what: str) -> UnsafeOutputError:
    """A default output (not named by the user) found something at its path."""
    return UnsafeOutputError(
        f"{text!r} already exists, and scalegp never replaces a file you did not name: give "
        f"{what} {text} to replace it, or {what} with another path")


def _same_file(target: str, source: str) -> bool:
    try:
        return os.path.samefile(target, source)
    except OSError:           # one of them does not exist: they are not the same file
        return False


# ------------------------------------------------------------------------------ writing
def write_atomically(path, write, *, binary=True, inputs=(), suffixes=None,
                     what="path", replace: bool = True) -> None:
    """Write a file through a temporary file and ``os.replace``; see the module docstring.

    Parameters
    ----------
    path : str or os.PathLike
        The target, checked by :func:`check_output_path` before and after the write.
    write : callable
        ``write(file)`` writes the whole content to ``file``, a binary file object (or a
        UTF-8 text file object without newline translation when ``binary`` is False).
    binary : bool
        Whether ``file`` is binary.
    inputs, suffixes, what, replace
        As in :func:`check_output_path`; with ``replace=False`` the complete file is moved
        into place by ``os.link``, which refuses a target that appeared during the write.

    Raises
    ------
    UnsafeOutputError
        The target is refused (nothing is written).
    OSError
        Writing failed; the target is unchanged and no temporary file is left. The message
        names ``path``.
    """
    def check():
        return check_output_path(path, inputs=inputs, suffixes=suffixes, what=what,
                                 replace=replace)

    target = check()
    folder, name = os.path.split(target)
    _remove_orphans(folder, name)
    with _terminating_signals_raise():
        try:
            descriptor, temporary = _create_temporary(folder, name, _mode_of(target))
        except OSError as error:
            raise _naming(error, path) from None
        try:
            with (os.fdopen(descriptor, "wb") if binary
                  else open(descriptor, "w", encoding="utf-8", newline="")) as file:
                write(file)
                file.flush()
                os.fsync(file.fileno())
            check()                     # the target may have changed during the write
            if replace:
                os.replace(temporary, target)
            else:
                _create_from(temporary, target, lambda: _exists_error(
                    os.fsdecode(os.fspath(path)), what))
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            if isinstance(error, OSError):
                raise _naming(error, path) from None
            raise
    _fsync_folder(folder)


def _create_from(temporary: str, target: str, exists) -> None:
    """Give the complete temporary file the target's name without replacing anything: a hard
    link fails with EEXIST if the target appeared meanwhile (``exists()`` is then raised).
    Where the file system has no hard links, the target was checked absent just before and
    ``os.replace`` moves it."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise exists() from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                               errno.EMLINK, errno.ENOSYS):
            raise
        os.replace(temporary, target)
        return
    os.unlink(temporary)


def _mode_of(target: str) -> tuple[int, bool]:
    """(permission bits, whether they must be forced past the umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode) & 0o777, True
    except FileNotFoundError:
        return NEW_FILE_MODE, False


def _random_token() -> str:
    return secrets.token_hex(RANDOM_HEX_DIGITS // 2)


def _temporary_prefix(name: str) -> str:
    return f".{name[:NAME_CHARACTERS]}.{HOST_TAG}-"


def _create_temporary(folder: str, name: str, mode: tuple[int, bool]) -> tuple[int, str]:
    bits, keep = mode
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    for _ in range(CREATE_ATTEMPTS):
        temporary = os.path.join(folder, f"{_temporary_prefix(name)}{os.getpid()}-"
                                         f"{_random_token()}{TEMPORARY_SUFFIX}")
        try:
            descriptor = os.open(temporary, flags, bits)
        except FileExistsError:        # taken (or planted): draw another name
            continue
        if keep:
            try:
                os.chmod(descriptor, bits)
            except BaseException:
                os.close(descriptor)
                os.unlink(temporary)
                raise
        return descriptor, temporary
    raise FileExistsError(errno.EEXIST, f"no free temporary name in {folder!r} after "
                                        f"{CREATE_ATTEMPTS} attempts")


def _remove_orphans(folder: str, name: str) -> None:
    """Remove temporary files of this target left by writers on this host that are dead."""
    pattern = re.compile(re.escape(_temporary_prefix(name)) + r"(\d+)-[0-9a-f]{"
                         + str(RANDOM_HEX_DIGITS) + "}" + re.escape(TEMPORARY_SUFFIX))
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match and not _alive(int(match[1])):
            with contextlib.suppress(OSError):      # unlink never follows a link
                os.unlink(os.path.join(folder, entry))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (True where that cannot be asked safely)."""
    if os.name != "posix":
        return True          # os.kill(pid, 0) would terminate the process on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # e.g. PermissionError: it exists, owned by another user
        return True
    return True


def _fsync_folder(folder: str) -> None:
    """Make the rename durable (not supported everywhere: best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _naming(error: OSError, path) -> OSError:
    """The same failure, naming the user's path instead of the temporary file."""
    reason = error.strerror or str(error) or type(error).__name__
    if error.errno is None:
        return OSError(f"cannot write {os.fspath(path)!r}: {reason}")
    return OSError(error.errno, f"cannot write {os.fspath(path)!r}: {reason}")


# ------------------------------------------------------------------------------ signals
class _Terminated(BaseException):
    """A terminating signal that arrived during a write, raised to run the clean-up."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise _Terminated(signum)


@contextlib.contextmanager
def _terminating_signals_raise():
    """Within the block, SIGTERM / SIGHUP with default handlers raise :class:`_Terminated`
    (so that the temporary file is removed); the signal is then delivered again with its
    default handler, which ends the process as it would have."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in TERMINATING_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _raise_terminated)
    try:
        yield
    except _Terminated as terminated:
        _restore(previous)
        signal.raise_signal(terminated.signum)
        raise
    finally:
        _restore(previous)


def _restore(previous: dict) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    previous.clear()
