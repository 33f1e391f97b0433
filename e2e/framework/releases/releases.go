// Package releases reads RELEASES, the record of this repository's
// releases, and checks it against the history and CHANGELOG.md. Git tags do
// not travel with every clone (CI clones with --no-tags), so the record is a
// file: every checkout knows its releases, and the upgrade test (TestUpgrade)
// takes the releases it upgrades from there.
//
// The file has one line per release, oldest first, with four fields
// separated by blanks ('#' starts a comment; blank lines are ignored):
//
//   - version: vMAJOR.MINOR.PATCH (semantic versioning, without pre-release
//     or build parts), each greater than the one before;
//   - commit: the full hash of the commit the release is; it is an ancestor
//     of HEAD (Check);
//   - date: the commit's date (committer date, UTC, YYYY-MM-DD);
//   - upgrade: "supported" when the current code promises a direct upgrade
//     from the release (CHANGELOG.md says how, TestUpgrade tests it), or
//     "unsupported" (upgrade through a later release).
//
// For example:
//
//	v0.2.0  467a7cf3971d1e0a41f3c131191261bfba48282b  2026-11-23  supported
package releases

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// File is the record's name, at the repository's root.
const File = "RELEASES"

// Changelog is the users' history of the releases, at the repository's
// root: a section per release whose heading is "## VERSION - DATE".
const Changelog = "CHANGELOG.md"

// The values of the upgrade field.
const (
	UpgradeSupported   = "supported"
	UpgradeUnsupported = "unsupported"
)

// Release is one line of the record.
type Release struct {
	// Version is vMAJOR.MINOR.PATCH.
	Version string
	// Commit is the full hash (40 hexadecimal digits) of the release.
	Commit string
	// Date is the commit's date, YYYY-MM-DD (UTC).
	Date string
	// Upgrade is UpgradeSupported or UpgradeUnsupported.
	Upgrade string
	// Line is the release's line number in the file.
	Line int
}

// Supported reports whether the current code promises a direct upgrade
// from r.
func (r Release) Supported() bool { return r.Upgrade == UpgradeSupported }

// Short is the commit's abbreviation used in logs and docs (7 digits).
func (r Release) Short() string { return r.Commit[:7] }

var (
	versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	commitRE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	dateRE    = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
)

// Read parses the record of the repository at root.
func Read(root string) ([]Release, error) {
	f, err := os.Open(filepath.Join(root, File))
	if err != nil {
		return nil, fmt.Errorf("read the release record: %w", err)
	}
	defer f.Close()
	rels, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	return rels, nil
}

// Parse reads a record and checks its form: four fields per line, valid
// versions in increasing order, full commits, dates and upgrade values, at
// least one release. It does not look at the history (Check does).
func Parse(r io.Reader) ([]Release, error) {
	var rels []Release
	var errs []error
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 4 {
			errs = append(errs, fmt.Errorf("line %d: %d fields, want 4 (version commit date upgrade)", n, len(fields)))
			continue
		}
		rel := Release{Version: fields[0], Commit: fields[1], Date: fields[2], Upgrade: fields[3], Line: n}
		if err := rel.validate(); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		if len(rels) > 0 {
			if prev := rels[len(rels)-1]; Compare(prev.Version, rel.Version) >= 0 {
				errs = append(errs, fmt.Errorf("line %d: version %s is not greater than %s (line %d): releases go oldest first", n, rel.Version, prev.Version, prev.Line))
				continue
			}
		}
		rels = append(rels, rel)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(errs) == 0 && len(rels) == 0 {
		errs = append(errs, errors.New("no release recorded"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rels, nil
}

func (r Release) validate() error {
	if !versionRE.MatchString(r.Version) {
		return fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH", r.Version)
	}
	if !commitRE.MatchString(r.Commit) {
		return fmt.Errorf("commit %q of %s is not a full commit hash (40 lower-case hexadecimal digits)", r.Commit, r.Version)
	}
	if !dateRE.MatchString(r.Date) {
		return fmt.Errorf("date %q of %s is not YYYY-MM-DD", r.Date, r.Version)
	}
	if r.Upgrade != UpgradeSupported && r.Upgrade != UpgradeUnsupported {
		return fmt.Errorf("upgrade %q of %s is neither %s nor %s", r.Upgrade, r.Version, UpgradeSupported, UpgradeUnsupported)
	}
	return nil
}

// Compare compares two valid versions as semantic versioning orders them:
// -1 when a is older than b, 0 when equal, +1 when newer.
func Compare(a, b string) int {
	pa, pb := versionRE.FindStringSubmatch(a), versionRE.FindStringSubmatch(b)
	for i := 1; i <= 3; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	return 0
}

// Check checks rels against the git history of the repository at root:
// each commit exists, is an ancestor of HEAD and has the recorded date;
// and against its CHANGELOG.md: one section per release, with the same
// date, and none for a version that is not recorded.
func Check(ctx context.Context, root string, rels []Release) error {
	var errs []error
	if out, err := git(ctx, root, "rev-parse", "--is-shallow-repository"); err != nil {
		return err
	} else if out == "true" {
		return errors.New("the clone is shallow: releases cannot be checked against the history (git fetch --unshallow)")
	}
	for _, r := range rels {
		if err := checkCommit(ctx, root, r); err != nil {
			errs = append(errs, fmt.Errorf("%s line %d: %w", File, r.Line, err))
		}
	}
	data, err := os.ReadFile(filepath.Join(root, Changelog))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, checkChangelog(data, rels)...)
	return errors.Join(errs...)
}

// checkCommit checks that r's commit is in the history of HEAD with r's
// date.
func checkCommit(ctx context.Context, root string, r Release) error {
	if _, err := git(ctx, root, "cat-file", "-e", r.Commit+"^{commit}"); err != nil {
		return fmt.Errorf("commit %s of %s is not in this repository", r.Commit, r.Version)
	}
	if _, err := git(ctx, root, "merge-base", "--is-ancestor", r.Commit, "HEAD"); err != nil {
		return fmt.Errorf("commit %s of %s is not an ancestor of HEAD", r.Commit, r.Version)
	}
	date, err := git(ctx, root, "show", "-s", "--date=format-local:%Y-%m-%d", "--format=%cd", r.Commit)
	if err != nil {
		return err
	}
	if date != r.Date {
		return fmt.Errorf("%s has date %s, but its commit %s was made on %s (UTC)", r.Version, r.Date, r.Short(), date)
	}
	return nil
}

// headingRE is a release's heading in CHANGELOG.md.
var headingRE = regexp.MustCompile(`^## (v[0-9][^ ]*) - ([0-9-]+)$`)

// checkChangelog checks that the changelog has one section per release of
// rels, newest first, with its date, and no other release section.
func checkChangelog(data []byte, rels []Release) []error {
	var errs []error
	want := map[string]Release{}
	for _, r := range rels {
		want[r.Version] = r
	}
	var seen []string
	for n, line := range bytes.Split(data, []byte("\n")) {
		m := headingRE.FindSubmatch(line)
		if m == nil {
			continue
		}
		version, date := string(m[1]), string(m[2])
		r, ok := want[version]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s line %d: section %s, but %s records no such release", Changelog, n+1, version, File))
			continue
		case date != r.Date:
			errs = append(errs, fmt.Errorf("%s line %d: %s dated %s, but %s says %s", Changelog, n+1, version, date, File, r.Date))
		}
		if len(seen) > 0 && Compare(seen[len(seen)-1], version) <= 0 {
			errs = append(errs, fmt.Errorf("%s line %d: section %s after %s: releases go newest first", Changelog, n+1, version, seen[len(seen)-1]))
		}
		seen = append(seen, version)
		delete(want, version)
	}
	for _, r := range rels {
		if _, missing := want[r.Version]; missing {
			errs = append(errs, fmt.Errorf("%s has no section \"## %s - %s\"", Changelog, r.Version, r.Date))
		}
	}
	return errs
}

// git runs git in root with TZ=UTC (dates) and returns its trimmed output.
func git(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Describe names HEAD after the newest release of rels, as git describe
// does with tags: "v0.2.0-72-g3d47e5d" is 72 commits after v0.2.0, at
// commit 3d47e5d; a release's own commit is just its version.
func Describe(ctx context.Context, root string, rels []Release) (string, error) {
	head, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	if len(rels) == 0 {
		return head[:7], nil
	}
	last := rels[len(rels)-1]
	if head == last.Commit {
		return last.Version, nil
	}
	n, err := git(ctx, root, "rev-list", "--count", last.Commit+"..HEAD")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-g%s", last.Version, n, head[:7]), nil
}

// Find returns the release of version in rels.
func Find(rels []Release, version string) (Release, error) {
	for _, r := range rels {
		if r.Version == version {
			return r, nil
		}
	}
	var known []string
	for _, r := range rels {
		known = append(known, r.Version)
	}
	return Release{}, fmt.Errorf("%s records no release %s (it has %s): add its line, and its section to %s", File, version, strings.Join(known, ", "), Changelog)
}
