"""Progress bars: tqdm when installed, else a line now and then; silent on ranks other than 0."""

from __future__ import annotations

import time


def progress_bar(total: int, desc: str, initial: int = 0):
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, initial=initial, dynamic_ncols=True, mininterval=2.0)
    except ImportError:
        return LineBar(total, desc, initial)


class LineBar:
    """tqdm's surface, printing one line now and then."""

    def __init__(self, total, desc, initial=0):
        self.n, self.total, self.desc, self.post, self.t = initial, total, desc, "", 0.0

    def update(self, k=1):
        self.n += k
        if time.perf_counter() - self.t > 10 or self.n == self.total:
            self.t = time.perf_counter()
            print(f"{self.desc}: {self.n}/{self.total} {self.post}", flush=True)

    def set_postfix_str(self, s, refresh=False):
        self.post = s

    def close(self):
        pass


class SilentBar(LineBar):
    """The bar of a process other than rank 0."""

    def __init__(self):
        super().__init__(0, "")

    def update(self, k=1):
        pass
