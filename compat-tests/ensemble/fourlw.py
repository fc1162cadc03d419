"""Four-letter words for the ensemble scripts: the raw answer, and a member's Mode."""

import socket


def four_letter(port, word, timeout=2.0):
    """The answer of a four-letter word, '' if the member does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def mode(port):
    """The member's `srvr` Mode (leader, follower, observer, standalone, ...), or ''."""
    for line in four_letter(port, "srvr").splitlines():
        if line.startswith("Mode: "):
            return line[len("Mode: "):]
    return ""
