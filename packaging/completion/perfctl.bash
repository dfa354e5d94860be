# bash completion for perfctl(1) - installed as
# /usr/share/bash-completion/completions/perfctl, loaded on first use.
#
# The subcommands and each one's options come from perfctl itself
# (`perfctl --complete-options COMMAND`: the getopt tables it parses with),
# so they cannot drift from it.  Kept here: the values perfctl takes (kinds,
# formats, sort keys), live pids and process names (comm) after --pid and
# --comm, systemd units after --unit, cgroups after --cgroup, and files where
# perfctl reads or writes one.  Nothing asks perfd: completion works without
# the daemon and without its socket's permission.

# The options of COMMAND ("": perfctl's own, then the commands) as the
# perfctl being completed ($1) lists them, one a line.
_perfctl_options()
{
	"$1" --complete-options "$2" 2>/dev/null
}

_perfctl()
{
	local cur prev words cword
	_init_completion || return

	local perfctl=${words[0]} line word
	local -a own=() commands=()
	while read -r line; do
		case $line in
		-*) own+=($line) ;;
		*) commands+=("$line") ;;
		esac
	done < <(_perfctl_options "$perfctl" "")

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
		COMPREPLY=($(compgen -W "cpu memory offcpu wall" -- "$cur"))
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
	esac

	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "${own[*]//=/}" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "${commands[*]}" -- "$cur"))
		fi
		return
	fi

	# the command's options; after one that takes a free-form value
	# (a line whose long name ends in "="), nothing to offer
	local -a opts=()
	while read -r line; do
		for word in $line; do
			opts+=("${word%=}")
			if [[ $line == --*=* && ${word%=} == "$prev" ]]; then
				return
			fi
		done
	done < <(_perfctl_options "$perfctl" "$cmd")
	((${#opts[@]})) || return
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "${opts[*]}" -- "$cur"))
	elif [[ $cmd == report || $cmd == diff ]]; then
		# report FILE, diff BEFORE AFTER: snapshot files
		_filedir
	fi
} &&
	complete -F _perfctl perfctl
