// Package docscheck keeps the documentation in step with the programs, for
// make verify (tools/cmd/docscheck):
//
//   - every flag a program prints in its --help is on that program's page
//     (docs/manager.md, ...), written `--name`;
//   - every relative link of README.md and docs/ leads to a file that
//     exists and, with a #fragment into a Markdown file, to a heading of it;
//   - README.md stays a front door: at most MaxReadmeLines lines.
//
// It needs nothing but the standard library.
package docscheck

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// MaxReadmeLines is the most lines README.md may have.
const MaxReadmeLines = 300

// Program is one program whose --help is checked against its page.
type Program struct {
	// Binary is the file name in the binaries' directory (make build's bin/).
	Binary string
	// Args come before --help: a subcommand of a plugin, say.
	Args []string
	// Page is the documentation page, relative to the repository root.
	Page string
}

// Programs are the programs the repository builds and their pages.
var Programs = []Program{
	{Binary: "manager", Page: "docs/manager.md"},
	{Binary: "provisioner", Page: "docs/provisioner.md"},
	{Binary: "hostdefiner", Page: "docs/hostdefiner.md"},
	{Binary: "kubectl-hostpath", Args: []string{"orphans"}, Page: "docs/kubectl-hostpath.md"},
}

// helpFlag matches a flag line of pflag's usage (the format of Go programs
// built on pflag and of cobra's "Flags:" section): at least two spaces,
// an optional shorthand, then --name.
var helpFlag = regexp.MustCompile(`^ {2,}(?:-[A-Za-z0-9], )?--([A-Za-z0-9][A-Za-z0-9_.-]*)(?:[ =\[]|$)`)

// HelpFlags returns the long names of the flags in a --help text, in their
// order, without "help" itself.
func HelpFlags(help string) []string {
	var flags []string
	for line := range strings.Lines(help) {
		m := helpFlag.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
		if m == nil || m[1] == "help" || slices.Contains(flags, m[1]) {
			continue
		}
		flags = append(flags, m[1])
	}
	return flags
}

// Documents reports whether page names the flag as `--name`: in
// backquotes, alone or followed by a value (`--pool NAME=PATH`,
// `--selinux=on`).
func Documents(page, flag string) bool {
	re := regexp.MustCompile("`--" + regexp.QuoteMeta(flag) + "(?:[ =][^`]*)?`")
	return re.MatchString(page)
}

// MissingFlags returns the flags of help that page does not document.
func MissingFlags(help, page string) []string {
	var missing []string
	for _, f := range HelpFlags(help) {
		if !Documents(page, f) {
			missing = append(missing, f)
		}
	}
	return missing
}

// CheckFlags compares each program's help (help returns it, given the
// program) with its page under root. It returns one line per undocumented
// flag, and an error when a help or a page cannot be read or a help lists
// no flag at all (its format is no longer what HelpFlags reads).
func CheckFlags(root string, programs []Program, help func(Program) (string, error)) ([]string, error) {
	var problems []string
	for _, p := range programs {
		text, err := help(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", commandLine(p), err)
		}
		if len(HelpFlags(text)) == 0 {
			return nil, fmt.Errorf("%s: no flag in its output", commandLine(p))
		}
		page, err := os.ReadFile(filepath.Join(root, p.Page))
		if err != nil {
			return nil, err
		}
		for _, f := range MissingFlags(text, string(page)) {
			problems = append(problems, fmt.Sprintf("%s: flag `--%s` (%s) is not documented", p.Page, f, commandLine(p)))
		}
	}
	return problems, nil
}

func commandLine(p Program) string {
	return strings.Join(append(append([]string{p.Binary}, p.Args...), "--help"), " ")
}

// CheckReadme returns a problem when README.md under root is longer than
// MaxReadmeLines.
func CheckReadme(root string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, err
	}
	n := strings.Count(string(data), "\n")
	if n > MaxReadmeLines {
		return []string{fmt.Sprintf("README.md: %d lines, more than %d: move the details to docs/", n, MaxReadmeLines)}, nil
	}
	return nil, nil
}

// link matches an inline Markdown link or image target: ](target).
var link = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// inlineCode matches a code span, whose text is not Markdown.
var inlineCode = regexp.MustCompile("`[^`]*`")

// CheckLinks checks the relative links of the Markdown files (paths
// relative to root). A link to a file in pending (paths relative to root)
// that does not exist yet is accepted: a page another branch adds.
func CheckLinks(root string, files, pending []string) ([]string, error) {
	headings := map[string][]string{}
	anchorsOf := func(file string) ([]string, error) {
		if a, ok := headings[file]; ok {
			return a, nil
		}
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		headings[file] = Anchors(string(data))
		return headings[file], nil
	}
	var problems []string
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for _, l := range Links(string(data)) {
			if p := checkLink(root, file, l.Target, pending, anchorsOf); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %s: %s", file, l.Line, l.Target, p))
			}
		}
	}
	return problems, nil
}

func checkLink(root, file, target string, pending []string, anchorsOf func(string) ([]string, error)) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, fragment, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
		if strings.HasPrefix(dest, "../") {
			return "leads outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
			if slices.Contains(pending, dest) {
				return ""
			}
			return fmt.Sprintf("no file %s", dest)
		}
	}
	if fragment == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	anchors, err := anchorsOf(dest)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors, fragment) {
		return fmt.Sprintf("no heading #%s in %s", fragment, dest)
	}
	return ""
}

// Link is a link target and the line (from 1) it is on.
type Link struct {
	Line   int
	Target string
}

// Links returns the link targets of a Markdown text, outside fenced code
// blocks and code spans.
func Links(text string) []Link {
	var out []Link
	forEachLine(text, func(n int, line string) {
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			out = append(out, Link{Line: n, Target: m[1]})
		}
	})
	return out
}

// Anchors returns the fragment each heading of a Markdown text gets on
// GitHub: lower case, punctuation dropped, spaces as dashes, "-1", "-2"
// added to repeated ones.
func Anchors(text string) []string {
	var anchors []string
	seen := map[string]int{}
	forEachLine(text, func(_ int, line string) {
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			return
		}
		a := Slug(line[level+1:])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors = append(anchors, a)
	})
	return anchors
}

// Slug is GitHub's anchor of a heading's text.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// forEachLine calls f with each line outside fenced code blocks.
func forEachLine(text string, f func(n int, line string)) {
	s := bufio.NewScanner(strings.NewReader(text))
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	fence := ""
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		f(n, line)
	}
}

// MarkdownFiles returns README.md and every .md file under docs/, relative
// to root, sorted.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(files[1:])
	return files, err
}

// Check runs every check on the repository at root, with the programs'
// binaries in bin (each run with --help), and returns the problems found.
// Links to the pending files (relative to root) may lead nowhere yet.
func Check(root, bin string, pending []string) ([]string, error) {
	problems, err := CheckFlags(root, Programs, func(p Program) (string, error) {
		return RunHelp(filepath.Join(bin, p.Binary), p.Args...)
	})
	if err != nil {
		return nil, err
	}
	readme, err := CheckReadme(root)
	if err != nil {
		return nil, err
	}
	files, err := MarkdownFiles(root)
	if err != nil {
		return nil, err
	}
	links, err := CheckLinks(root, files, pending)
	if err != nil {
		return nil, err
	}
	return slices.Concat(problems, readme, links), nil
}

// RunHelp runs path with args and --help and returns what it printed on
// stdout and stderr. The exit status does not matter (pflag programs may
// exit 0 or 2 after their usage), but a program that cannot be started is
// an error.
func RunHelp(path string, args ...string) (string, error) {
	cmd := exec.Command(path, append(args, "--help")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/dev/null")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return "", err
	}
	return string(out), nil
}
