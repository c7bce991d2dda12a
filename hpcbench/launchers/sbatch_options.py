"""sbatch's options as sbatch reads them from #SBATCH lines, and which of them hpcbench
keeps to itself.

sbatch (Slurm 22.05.8, Debian 12's slurm-wlm, the node image's) splits each #SBATCH
line into words (src/sbatch/opt.c:459-538 get_argument: quotes and backslashes as a
shell would, an unquoted '#' ends the line, a word "hetjob" or "packjob" is blanked,
a word that starts with ':' is fatal), gathers the words of every line into one argv
and reads it with glibc's getopt_long (opt.c:642-657 _set_options) over the table
slurm_option_table_create builds (src/common/slurm_opt.c:5207-5270: optstring "+",
so the first word that is not an option ends the options and sbatch refuses the
script as "Invalid directive"). getopt_long takes an exact long name, else a prefix
that only one option (or options that all mean the same) begins with (`--job=x` is
--job-name=x), and a short option's value attached (`-Jx`) or as the next word.

A user's #SBATCH options come after hpcbench's, so a later value of an option
hpcbench sets would win: `owned_problem` finds any, however it is spelled.
"""

from __future__ import annotations

# sbatch's long options: name -> (has_arg, what it sets). has_arg: 0 none, 1 required,
# 2 optional (getopt's no_/required_/optional_argument); what it sets: the short option
# letter, or slurm_opt.c's LONG_OPT_* name without its prefix. Every entry of
# common_options (slurm_opt.c:5049) with a set_func or set_func_sbatch, in its order.
LONG = {
    "account": (1, "A"),
    "acctg-freq": (1, "ACCTG_FREQ"),
    "array": (1, "a"),
    "batch": (1, "BATCH"),
    "begin": (1, "b"),
    "bb": (1, "BURST_BUFFER_SPEC"),
    "bbf": (1, "BURST_BUFFER_FILE"),
    "cluster-constraint": (1, "CLUSTER_CONSTRAINT"),
    "chdir": (1, "D"),
    "cluster": (1, "CLUSTER"),
    "clusters": (1, "M"),
    "comment": (1, "COMMENT"),
    "container": (1, "CONTAINER"),
    "context": (1, "CONTEXT"),
    "contiguous": (0, "CONTIGUOUS"),
    "constraint": (1, "C"),
    "core-spec": (1, "S"),
    "cores-per-socket": (1, "CORESPERSOCKET"),
    "cpu-freq": (1, "CPU_FREQ"),
    "cpus-per-gpu": (1, "CPUS_PER_GPU"),
    "cpus-per-task": (1, "c"),
    "deadline": (1, "DEADLINE"),
    "delay-boot": (1, "DELAY_BOOT"),
    "dependency": (1, "d"),
    "distribution": (1, "m"),
    "error": (1, "e"),
    "exclude": (1, "x"),
    "exclusive": (2, "EXCLUSIVE"),
    "export": (1, "EXPORT"),
    "export-file": (1, "EXPORT_FILE"),
    "extra-node-info": (1, "B"),
    "get-user-env": (2, "GET_USER_ENV"),
    "gid": (1, "GID"),
    "gpu-bind": (1, "GPU_BIND"),
    "gpu-freq": (1, "GPU_FREQ"),
    "gpus": (1, "G"),
    "gpus-per-node": (1, "GPUS_PER_NODE"),
    "gpus-per-socket": (1, "GPUS_PER_SOCKET"),
    "gpus-per-task": (1, "GPUS_PER_TASK"),
    "gres": (1, "GRES"),
    "gres-flags": (1, "GRES_FLAGS"),
    "help": (0, "h"),
    "hint": (1, "HINT"),
    "hold": (0, "H"),
    "ignore-pbs": (0, "IGNORE_PBS"),
    "input": (1, "i"),
    "job-name": (1, "J"),
    "kill-on-invalid-dep": (1, "KILL_INV_DEP"),
    "licenses": (1, "L"),
    "mail-type": (1, "MAIL_TYPE"),
    "mail-user": (1, "MAIL_USER"),
    "mcs-label": (1, "MCS_LABEL"),
    "mem": (1, "MEM"),
    "mem-bind": (1, "MEM_BIND"),
    "mem-per-cpu": (1, "MEM_PER_CPU"),
    "mem-per-gpu": (1, "MEM_PER_GPU"),
    "mincpus": (1, "MINCPUS"),
    "network": (1, "NETWORK"),
    "nice": (2, "NICE"),
    "no-kill": (2, "k"),
    "no-requeue": (0, "NO_REQUEUE"),
    "nodefile": (1, "F"),
    "nodelist": (1, "w"),
    "nodes": (1, "N"),
    "ntasks": (1, "n"),
    "ntasks-per-core": (1, "NTASKSPERCORE"),
    "ntasks-per-gpu": (1, "NTASKSPERGPU"),
    "ntasks-per-node": (1, "NTASKSPERNODE"),
    "ntasks-per-socket": (1, "NTASKSPERSOCKET"),
    "ntasks-per-tres": (1, "NTASKSPERTRES"),
    "open-mode": (1, "OPEN_MODE"),
    "output": (1, "o"),
    "overcommit": (0, "O"),
    "oversubscribe": (0, "s"),
    "parsable": (0, "PARSABLE"),
    "partition": (1, "p"),
    "power": (1, "POWER"),
    "prefer": (1, "PREFER"),
    "priority": (1, "PRIORITY"),
    "profile": (1, "PROFILE"),
    "propagate": (2, "PROPAGATE"),
    "qos": (1, "q"),
    "quiet": (0, "Q"),
    "reboot": (0, "REBOOT"),
    "requeue": (0, "REQUEUE"),
    "reservation": (1, "RESERVATION"),
    "signal": (1, "SIGNAL"),
    "sockets-per-node": (1, "SOCKETSPERNODE"),
    "spread-job": (0, "SPREAD_JOB"),
    "switches": (1, "SWITCHES"),
    "tasks-per-node": (1, "NTASKSPERNODE"),
    "test-only": (0, "TEST_ONLY"),
    "thread-spec": (1, "THREAD_SPEC"),
    "threads-per-core": (1, "THREADSPERCORE"),
    "time": (1, "t"),
    "time-min": (1, "TIME_MIN"),
    "tmp": (1, "TMP"),
    "uid": (1, "UID"),
    "use-min-nodes": (0, "USE_MIN_NODES"),
    "verbose": (0, "v"),
    "version": (0, "V"),
    "usage": (0, "USAGE"),
    "wait": (0, "W"),
    "wait-all-nodes": (1, "WAIT_ALL_NODES"),
    "wckey": (1, "WCKEY"),
    "wrap": (1, "WRAP"),
}
# The short options: the letter -> has_arg (slurm_opt.c:5262-5267 appends each letter,
# with ':' when it takes a value and '::' when the value is optional).
SHORT = {val: has_arg for has_arg, val in LONG.values() if len(val) == 1}

# What hpcbench sets or relies on, and why ("it": hpcbench) a user's value is refused:
# the job's identity (name, output files, cluster, owner), its lifetime (time, start,
# deadline, requeue), sbatch's reply, the job's environment, and the run's shape.
_NAMES = "it names each job, reads its output and cancels it by them"
_LIFE = "it bounds when each job starts and how long it runs"
_REPLY = "it reads sbatch's reply and submits each job once"
_ENV = "it gives each job its environment"
_RANKS = "each run's ranks are the sweep's (--nodes, --gpus-per-node)"
_PINNED = "it pins a testbed's nodes; Slurm chooses a cluster's"
OWNED = {
    "job-name": _NAMES,
    "output": _NAMES,
    "error": _NAMES,
    "open-mode": _NAMES,
    "array": _NAMES,  # many jobs of one name
    "clusters": _NAMES,  # a job on another cluster is not in this one's squeue
    "cluster": _NAMES,
    "uid": _NAMES,
    "gid": _NAMES,
    "wrap": "it writes the batch script",
    "time": _LIFE + "; use --slurm-time (campaign key time)",
    "time-min": _LIFE,  # backfill may lower --time to it (sbatch(1))
    "deadline": _LIFE,
    "begin": _LIFE,
    "dependency": _LIFE,
    "hold": _LIFE,
    "requeue": _LIFE,  # a requeued job runs again
    "signal": _LIFE,
    "parsable": _REPLY,
    "test-only": _REPLY,
    "wait": _REPLY,
    "help": _REPLY,
    "usage": _REPLY,
    "version": _REPLY,
    "export": _ENV,
    "export-file": _ENV,
    "get-user-env": _ENV,
    "nodes": _RANKS,
    "ntasks": _RANKS,
    "ntasks-per-node": _RANKS,
    "tasks-per-node": _RANKS,
    "cpus-per-task": "use --slurm-cpus-per-task (campaign key cpus_per_task)",
    "partition": "use --partition (campaign key partition)",
    "account": "use --account (campaign key account)",
    "qos": "use --qos (campaign key qos)",
    "gres": "use --slurm-gpus (campaign key gpus_per_node)",
    "nodelist": _PINNED,
    "nodefile": _PINNED,
}
# Short option letter -> its long name (getopt returns the same value for both).
_BY_VAL = {val: name for name, (_, val) in LONG.items()}


def words(line: str) -> list[str]:
    """An #SBATCH line's words as sbatch's get_argument splits them (opt.c:459-538):
    whitespace between words; '...' and "..." quote; a backslash takes the character
    after it as it is, inside quotes too, but never joins words; an unquoted '#' ends
    the line. ValueError where sbatch stops (a word that starts with ':', an unmatched
    quote) and at a word "hetjob" or "packjob", which sbatch blanks and which ends its
    line there (a job of components, which hpcbench does not submit)."""
    out: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i].isspace():
            i += 1
        rest = line[i:].split(maxsplit=1)
        if not rest:
            return out
        if rest[0].lower() in ("hetjob", "packjob"):
            raise ValueError(f"{rest[0]!r} separates the parts of a heterogeneous job")
        if line[i] == ":":
            raise ValueError("sbatch stops at a word that starts with ':'")
        word, quote = [], ""
        while i < n and (quote or not line[i].isspace()):
            c = line[i]
            i += 1
            if c == "\\":
                if i < n and (quote or not line[i].isspace()):
                    word.append(line[i])
                    i += 1
            elif quote:
                if c == quote:
                    quote = ""
                else:
                    word.append(c)
            elif c in "'\"":
                quote = c
            elif c == "#":
                i = n
            else:
                word.append(c)
        if quote:
            raise ValueError(f"sbatch stops at the unmatched {quote}")
        if not word:  # '#' began it
            return out
        out.append("".join(word))


def _long(word: str) -> tuple[str | None, str]:
    """A --name[=value] word as getopt_long resolves it: (the option's name, or None
    where sbatch 22.05 has none, and the name as written). An exact name wins; else the
    options the name begins, ambiguous (ValueError) unless one, or all alike."""
    given = word[2:].partition("=")[0]
    if given in LONG:
        return given, given
    found = [name for name in LONG if name.startswith(given)]
    alike = {LONG[name] for name in found}
    if len(alike) > 1:
        raise ValueError(f"--{given} is ambiguous in sbatch: " + ", ".join(f"--{f}" for f in found))
    return (found[0] if found else None), given


def resolved(texts: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """The options #SBATCH lines of `texts` give, in order, as sbatch reads them: each
    (long name, as written); a name sbatch 22.05 does not know is kept as written (a
    later Slurm may know it; the cluster's `sbatch --test-only` says). ValueError where
    sbatch would refuse the lines."""
    argv = [w for text in texts for w in words(text)]
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--":  # getopt's end of options: nothing may follow it
            if i < len(argv):
                raise ValueError(f"{argv[i]!r} follows '--', where sbatch stops reading")
            break
        if not word.startswith("-") or word == "-":
            raise ValueError(f"{word!r} is not an option, and sbatch stops reading there")
        if word.startswith("--"):
            name, given = _long(word)
            has_arg = LONG[name][0] if name else (0 if "=" in word else 1)
            if name is None and i < len(argv) and argv[i].startswith("-"):
                has_arg = 0  # an unknown option's value, if any, is attached
            if "=" in word and has_arg == 0 and name:
                raise ValueError(f"--{name} takes no value")
            if "=" not in word and has_arg == 1:
                if i >= len(argv):
                    raise ValueError(f"--{name or given} needs a value")
                i += 1
            out.append((name or given, word))
            continue
        for k in range(1, len(word)):
            letter = word[k]
            if letter not in SHORT:
                raise ValueError(f"sbatch has no option -{letter}")
            out.append((_BY_VAL[letter], word))
            if SHORT[letter] == 0:
                continue
            if k + 1 == len(word) and SHORT[letter] == 1:
                if i >= len(argv):
                    raise ValueError(f"-{letter} needs a value")
                i += 1
            break  # the rest of the word is the value
    return out


def owned_problem(texts: list[str] | tuple[str, ...]) -> str | None:
    """Why #SBATCH lines of `texts`, after hpcbench's own, cannot be taken: an option
    hpcbench sets or relies on (however spelled), or lines sbatch would refuse. None
    where they may go in."""
    try:
        options = resolved(texts)
    except ValueError as err:
        return str(err)
    for name, written in options:
        if name in OWNED:
            shown = f"--{name}" if written == f"--{name}" else f"{written!r} (--{name})"
            return f"{shown} is hpcbench's to set: {OWNED[name]}"
    return None


# sbatch's variables that set an option hpcbench keeps (opt.c:177-237 env_vars). sbatch
# reads them after the script's #SBATCH lines (opt.c:380-392), so they win over
# hpcbench's. The first four only where hpcbench sets that option.
ENV_OPTIONS = {
    "SBATCH_ARRAY_INX": "array",
    "SBATCH_CLUSTERS": "clusters",
    "SBATCH_ERROR": "error",
    "SBATCH_EXPORT": "export",
    "SBATCH_GET_USER_ENV": "get-user-env",
    "SBATCH_JOB_NAME": "job-name",
    "SBATCH_OPEN_MODE": "open-mode",
    "SBATCH_OUTPUT": "output",
    "SBATCH_REQUEUE": "requeue",
    "SBATCH_SIGNAL": "signal",
    "SBATCH_TIMELIMIT": "time",
    "SBATCH_WAIT": "wait",
}
ENV_DEFAULTS = {
    "SBATCH_ACCOUNT": "account",
    "SBATCH_PARTITION": "partition",
    "SBATCH_QOS": "qos",
    "SBATCH_GRES": "gres",
}


def env_problem(environ: dict[str, str], sets: set[str]) -> str | None:
    """Why sbatch run with `environ` would not take hpcbench's options: a variable that
    overrides one hpcbench keeps, or one of `sets` (the options hpcbench sets for this
    sweep, e.g. its --partition). None where none does."""
    for var, name in {**ENV_OPTIONS, **ENV_DEFAULTS}.items():
        if var in environ and (var in ENV_OPTIONS or name in sets):
            return (
                f"{var} is set, and sbatch would take it over hpcbench's --{name} "
                f"({OWNED[name]}): unset it"
            )
    return None
