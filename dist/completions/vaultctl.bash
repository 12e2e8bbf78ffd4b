#!/bin/bash
# Made by `vaultctl --generate-completion-script bash` (scripts/gen-docs). Do not edit.
_vaultctl() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local words_path="vaultctl" i
    case "$prev" in
        --secrets-file|--socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --account|--browser|--client-id|--expires-at|--issuer|--limit|--min-valid|--name|--provider) COMPREPLY=(); return ;;
    esac
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "$words_path ${COMP_WORDS[i]}" in
            "vaultctl status"|"vaultctl login"|"vaultctl token"|"vaultctl factors"|"vaultctl lock"|"vaultctl unlock"|"vaultctl enroll"|"vaultctl disable"|"vaultctl reenroll"|"vaultctl reset"|"vaultctl import"|"vaultctl sessions"|"vaultctl logout"|"vaultctl context"|"vaultctl sync"|"vaultctl sync conflicts"|"vaultctl audit"|"vaultctl apps"|"vaultctl apps list"|"vaultctl apps allow"|"vaultctl apps revoke") words_path="$words_path ${COMP_WORDS[i]}" ;;
        esac
    done
    case "$words_path" in
        "vaultctl") COMPREPLY=($(compgen -W "status login token factors lock unlock enroll disable reenroll reset import sessions logout context sync audit apps --version -h --help" -- "$cur")) ;;
        "vaultctl status") COMPREPLY=($(compgen -W "--socket --non-interactive --json -h --help" -- "$cur")) ;;
        "vaultctl login") COMPREPLY=($(compgen -W "--socket --non-interactive --no-browser --browser --json -h --help" -- "$cur")) ;;
        "vaultctl token") COMPREPLY=($(compgen -W "--socket --non-interactive --json --min-valid -h --help" -- "$cur")) ;;
        "vaultctl factors") COMPREPLY=($(compgen -W "--socket --non-interactive --json -h --help" -- "$cur")) ;;
        "vaultctl lock") COMPREPLY=($(compgen -W "--socket --non-interactive -h --help" -- "$cur")) ;;
        "vaultctl unlock") COMPREPLY=($(compgen -W "--socket --non-interactive -h --help" -- "$cur")) ;;
        "vaultctl enroll") COMPREPLY=($(compgen -W "--socket --non-interactive -h --help" -- "$cur")) ;;
        "vaultctl disable") COMPREPLY=($(compgen -W "--socket --non-interactive -y --yes -h --help" -- "$cur")) ;;
        "vaultctl reenroll") COMPREPLY=($(compgen -W "--socket --non-interactive -h --help" -- "$cur")) ;;
        "vaultctl reset") COMPREPLY=($(compgen -W "--socket --non-interactive -y --yes -h --help" -- "$cur")) ;;
        "vaultctl import") COMPREPLY=($(compgen -W "--socket --non-interactive --issuer --client-id --account --provider --name --expires-at --secrets-file -h --help" -- "$cur")) ;;
        "vaultctl sessions") COMPREPLY=($(compgen -W "--socket --non-interactive --json -h --help" -- "$cur")) ;;
        "vaultctl logout") COMPREPLY=($(compgen -W "--socket --non-interactive --all -h --help" -- "$cur")) ;;
        "vaultctl context") COMPREPLY=($(compgen -W "--socket --non-interactive --json --account -h --help" -- "$cur")) ;;
        "vaultctl sync") COMPREPLY=($(compgen -W "conflicts -h --help" -- "$cur")) ;;
        "vaultctl sync conflicts") COMPREPLY=($(compgen -W "--socket --non-interactive --json -h --help" -- "$cur")) ;;
        "vaultctl audit") COMPREPLY=($(compgen -W "--socket --non-interactive --json --verify --limit -h --help" -- "$cur")) ;;
        "vaultctl apps") COMPREPLY=($(compgen -W "list allow revoke -h --help" -- "$cur")) ;;
        "vaultctl apps list") COMPREPLY=($(compgen -W "--socket --non-interactive --json -h --help" -- "$cur")) ;;
        "vaultctl apps allow") COMPREPLY=($(compgen -W "--socket --non-interactive -h --help" -- "$cur")) ;;
        "vaultctl apps revoke") COMPREPLY=($(compgen -W "--socket --non-interactive -h --help" -- "$cur")) ;;
    esac
}
complete -F _vaultctl vaultctl
