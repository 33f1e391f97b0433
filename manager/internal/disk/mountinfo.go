package disk

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// DefaultMountInfoFile is the mount table read before a volume is removed
// when Config.MountInfoFile is empty: the manager's own mounts, with paths
// as the manager sees them.
const DefaultMountInfoFile = "/proc/self/mountinfo"

// readMountPoints returns the mount points listed in a file in the format
// of /proc/self/mountinfo.
func readMountPoints(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	points, err := parseMountInfo(f)
	if err != nil {
		return nil, fmt.Errorf("read mount table %s: %w", file, err)
	}
	return points, nil
}

// parseMountInfo returns the mount points (the fifth field, decoded) of a
// mountinfo table (proc_pid_mountinfo(5)).
func parseMountInfo(r io.Reader) ([]string, error) {
	var points []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || !strings.HasPrefix(fields[4], "/") {
			return nil, fmt.Errorf("line %d is not a mountinfo entry: %q", line, sc.Text())
		}
		points = append(points, unescapeMountPath(fields[4]))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return points, nil
}

// unescapeMountPath decodes the octal escapes (\040 for a space, \011, \012,
// \134) the kernel writes in mountinfo paths.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) && s[i+1] <= '3' {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// mountsInside returns, sorted and without duplicates, the mount points that
// are one of dirs or lie below one of them.
func mountsInside(points []string, dirs ...string) []string {
	var inside []string
	for _, p := range points {
		for _, d := range dirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				inside = append(inside, p)
				break
			}
		}
	}
	slices.Sort(inside)
	return slices.Compact(inside)
}
