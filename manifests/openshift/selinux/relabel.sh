#!/bin/sh
# relabel.sh PATH: gives PATH and everything below it the SELinux type
# container_file_t, so that pods may use hostPath volumes there; symlinks are
# relabelled themselves, never followed. Run by hostpath-relabel.service
# (installed as /usr/local/bin/hostpath-relabel.sh); see docs/manager.md, "SELinux".
exec chcon -R -h -t container_file_t -- "${1:?usage: relabel.sh PATH}"
