# bash completion for perfctl(1) - installed as
# /usr/share/bash-completion/completions/perfctl, loaded on first use.
#
# Completes the subcommands, each one's options (the tables of cli/*.c), the
# values perfctl takes (kinds, formats, sort keys), live pids and process
# names (comm) after --pid and --comm, systemd units after --unit, cgroups after
# --cgroup, and files where perfctl reads or writes one.  Nothing asks perfd:
# completion works without the daemon and without its socket's permission.

_perfctl()
{
	local cur prev words cword
	_init_completion || return

	local commands="status ps snapshot mem report diff diagnose top record help"
	local global="--socket --json --help --version"
	local selection="--pid --comm --cgroup --unit --all --duration --since --from --to"

	# the subcommand: the first word that is not an option or its value
	local i cmd=""
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--socket) ((i++)) ;;
		-*) ;;
		*) cmd=${words[i]}; break ;;
		esac
	done

	case $prev in
	--socket)
		_filedir
		return ;;
	--pid)
		_pids
		return ;;
	--comm)
		# the kernel's comm, which --comm matches, not the command line
		local IFS=$'\n'
		COMPREPLY=($(compgen -W "$(cat /proc/[0-9]*/comm 2>/dev/null | sort -u)" -- "$cur"))
		return ;;
	--unit)
		COMPREPLY=($(compgen -W "$(systemctl list-units --type=service --all --plain \
			--no-legend --no-pager 2>/dev/null | awk '{ print $1 }')" -- "$cur"))
		return ;;
	--cgroup)
		local IFS=$'\n'
		COMPREPLY=($(cd /sys/fs/cgroup 2>/dev/null && compgen -d -S / -- "${cur#/}"))
		compopt -o nospace 2>/dev/null
		return ;;
	--kind)
		COMPREPLY=($(compgen -W "cpu memory offcpu" -- "$cur"))
		return ;;
	--format | -f)
		if [[ $cmd == diff ]]; then
			COMPREPLY=($(compgen -W "text html svg" -- "$cur"))
		elif [[ $cmd != top ]]; then
			COMPREPLY=($(compgen -W "folded json pprof speedscope html svg" -- "$cur"))
		fi
		[[ $cmd == top ]] || return ;;
	--sort)
		if [[ $cmd == top ]]; then
			COMPREPLY=($(compgen -W "cpu rss peak growth self total" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "self total name" -- "$cur"))
		fi
		return ;;
	--output | -o)
		_filedir
		return ;;
	--interval | --duration | --since | --from | --to | --top | --callers | --callees | \
		--delay | -d | --iterations | -n | --rows | --filter)
		return ;;
	esac

	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$global" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		fi
		return
	fi

	local opts=""
	case $cmd in
	status) opts="" ;;
	ps) opts="--interval --all" ;;
	snapshot) opts="$selection --kind --format --output -o --lines --no-lines --threads" ;;
	mem) opts="--pid --since --top" ;;
	report) opts="$selection --kind --sort --top --callers --callees --lines" ;;
	diff) opts="--kind --top --format --output -o" ;;
	diagnose) opts="$selection" ;;
	record) opts="--kind --format --output -o --lines --no-lines --threads" ;;
	top) opts="-b --batch -n --iterations -d --delay --pid -f --functions --sort --filter
		-M --memory -k --kernel-threads -a --all --rows" ;;
	*) return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts --json --socket --help" -- "$cur"))
	elif [[ $cmd == report || $cmd == diff ]]; then
		# report FILE, diff BEFORE AFTER: snapshot files
		_filedir
	fi
} &&
	complete -F _perfctl perfctl
