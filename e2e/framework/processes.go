package framework

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ContainerProcesses returns the PIDs of the processes of program (the base
// name of the executable, as the container sees it: "provisioner",
// "manager") that run for node, told by the NODE_NAME variable of their
// environment, which the product's DaemonSets set. It reads /proc, so it
// sees the containers of every local node (the suite runs as root).
func ContainerProcesses(node, program string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	want := []byte("NODE_NAME=" + node)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != program {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// KillContainerProcess sends SIGKILL to the one process of program that
// runs for node (see ContainerProcesses), as a crash would: no graceful
// shutdown, and the kubelet restarts the container. It returns the PID.
func KillContainerProcess(node, program string) (int, error) {
	pids, err := ContainerProcesses(node, program)
	if err != nil {
		return 0, err
	}
	if len(pids) != 1 {
		return 0, fmt.Errorf("%d processes of %s run for node %s (%v), want one", len(pids), program, node, pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill -9 %s (PID %d) of node %s: %w", program, pids[0], node, err)
	}
	return pids[0], nil
}
