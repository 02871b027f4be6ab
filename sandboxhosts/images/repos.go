package images

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Limits that keep FindRepos quick on any image, however large or hostile.
// Past a limit it stops looking and returns what it found.
const (
	maxRepoDepth   = 8       // directory levels below / that are searched
	maxRepos       = 100     // repositories reported
	maxDirsRead    = 100_000 // merged directories listed
	maxConfigBytes = 1 << 20 // a larger .git/config is read as having no remotes
)

// skippedRoots are the top-level directories the runtime mounts over: what an
// image ships there is never seen by the sandbox.
var skippedRoots = map[string]bool{"proc": true, "sys": true, "dev": true}

// Repo is a git repository found in an image: its directory (absolute, as the
// sandbox sees it) and its remotes.
type Repo struct {
	Path    string
	Remotes []Remote
}

// Remote is a git remote as its repository's config names it.
type Remote struct {
	Name, URL string
}

// FindRepos lists the git repositories of img's root file system as the
// sandbox sees it: the overlay of img.LowerDirs, where an upper layer's entry
// hides the same path below, a whiteout (0:0 character device) hides it, and
// an opaque directory hides the directories below it.
//
// A repository is a directory with a .git directory holding a config file, or
// a bare repository: a directory named *.git holding config, HEAD and
// objects. The search does not descend into a repository (nested repositories
// and submodules are not reported), never follows symlinks, skips /proc, /sys
// and /dev, and stops at the limits above, so its result may be partial.
//
// Remotes come from the config's [remote "name"] sections: the first url of
// each (the one git fetches from), as written (url.*.insteadOf is not
// applied, include files are not read); remotes without a url are left out.
// A config git could not parse yields a repository without remotes, not an
// error. Repos are sorted by path, remotes by name.
func FindRepos(img *Image) ([]Repo, error) {
	f := &repoFinder{dirsLeft: maxDirsRead}
	if len(img.LowerDirs) > 0 {
		if err := f.walk("/", img.LowerDirs, 0); err != nil {
			return nil, fmt.Errorf("find repos: %w", err)
		}
	}
	slices.SortFunc(f.repos, func(a, b Repo) int { return strings.Compare(a.Path, b.Path) })
	return f.repos, nil
}

type repoFinder struct {
	repos    []Repo
	dirsLeft int
}

// walk searches the merged directory p (absolute in the image) made of the
// layer directories dirs, top first.
func (f *repoFinder) walk(p string, dirs []string, depth int) error {
	if len(f.repos) >= maxRepos || f.dirsLeft <= 0 {
		return nil
	}
	entries, err := f.readMerged(dirs)
	if err != nil {
		return fmt.Errorf("list %s: %w", p, err)
	}
	repo, found, err := f.repoAt(p, entries)
	if err != nil {
		return err
	}
	if found {
		f.repos = append(f.repos, repo)
		return nil
	}
	if depth == maxRepoDepth {
		return nil
	}
	for _, e := range entries {
		if e.kind != kindDir || depth == 0 && skippedRoots[e.name] {
			continue
		}
		if err := f.walk(path.Join(p, e.name), e.dirs, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// repoAt reports the repository whose directory p has the given entries, if
// it is one.
func (f *repoFinder) repoAt(p string, entries []mergedEntry) (Repo, bool, error) {
	var config string
	if git, ok := findEntry(entries, ".git"); ok && git.kind == kindDir {
		gitEntries, err := f.readMerged(git.dirs)
		if err != nil {
			return Repo{}, false, fmt.Errorf("list %s: %w", path.Join(p, ".git"), err)
		}
		if c, ok := findEntry(gitEntries, "config"); ok && c.kind == kindFile {
			config = c.path
		}
	} else if strings.HasSuffix(p, ".git") {
		c, hasConfig := findEntry(entries, "config")
		head, hasHead := findEntry(entries, "HEAD")
		objects, hasObjects := findEntry(entries, "objects")
		if hasConfig && c.kind == kindFile && hasHead && head.kind != kindDir && hasObjects && objects.kind == kindDir {
			config = c.path
		}
	}
	if config == "" {
		return Repo{}, false, nil
	}
	remotes, err := readRemotes(config)
	if err != nil {
		return Repo{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return Repo{Path: p, Remotes: remotes}, true, nil
}

type entryKind int

const (
	kindOther entryKind = iota // symlinks, devices, fifos, sockets
	kindDir
	kindFile
)

// mergedEntry is a name in a directory of the overlay.
type mergedEntry struct {
	name string
	kind entryKind
	// dirs are the layer directories a directory merges, top first; path is
	// the topmost layer's file for anything else.
	dirs []string
	path string
}

func findEntry(entries []mergedEntry, name string) (mergedEntry, bool) {
	i, ok := slices.BinarySearchFunc(entries, name, func(e mergedEntry, name string) int { return strings.Compare(e.name, name) })
	if !ok {
		return mergedEntry{}, false
	}
	return entries[i], true
}

// readMerged lists the directory overlayfs would make of dirs (top first),
// sorted by name: the topmost entry of a name wins, a whiteout hides the name,
// and a directory merges with the same name below until that is no directory
// or the directory is opaque.
func (f *repoFinder) readMerged(dirs []string) ([]mergedEntry, error) {
	f.dirsLeft--
	byName := map[string]*mergedEntry{}
	hidden := map[string]bool{}
	// merging holds the directories that still take in the layers below.
	merging := map[string]bool{}
	for _, dir := range dirs {
		des, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, de := range des {
			name, p := de.Name(), filepath.Join(dir, de.Name())
			if hidden[name] {
				continue
			}
			if e, seen := byName[name]; seen {
				if !merging[name] {
					continue
				}
				if !de.IsDir() {
					delete(merging, name)
					continue
				}
				e.dirs = append(e.dirs, p)
				if opaque(p) {
					delete(merging, name)
				}
				continue
			}
			switch t := de.Type(); {
			case t.IsDir():
				byName[name] = &mergedEntry{name: name, kind: kindDir, dirs: []string{p}}
				merging[name] = !opaque(p)
			case t.IsRegular():
				byName[name] = &mergedEntry{name: name, kind: kindFile, path: p}
			case t&fs.ModeCharDevice != 0:
				wh, err := isWhiteout(p)
				if err != nil {
					return nil, err
				}
				if wh {
					hidden[name] = true
				} else {
					byName[name] = &mergedEntry{name: name, path: p}
				}
			default:
				byName[name] = &mergedEntry{name: name, path: p}
			}
		}
	}
	entries := make([]mergedEntry, 0, len(byName))
	for _, e := range byName {
		entries = append(entries, *e)
	}
	slices.SortFunc(entries, func(a, b mergedEntry) int { return strings.Compare(a.name, b.name) })
	return entries, nil
}

// isWhiteout reports whether p is the 0:0 character device the unpacker makes
// for a layer's .wh. entry. (The unpacker leaves no .wh. names behind.)
func isWhiteout(p string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, fmt.Errorf("whiteout %s: %w", p, err)
	}
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0, nil
}

// opaque reports whether the layer directory p hides the layers below it. A
// directory whose xattr cannot be read is taken as not opaque.
func opaque(p string) bool {
	buf := make([]byte, 1)
	n, err := unix.Lgetxattr(p, overlayOpaqueXattr, buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// readRemotes reads the remotes of the git config file p, a regular file of a
// layer.
func readRemotes(p string) ([]Remote, error) {
	// O_NONBLOCK: should p have become a fifo, opening it must not hang.
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("git config: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("git config: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxConfigBytes {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes))
	if err != nil {
		return nil, fmt.Errorf("git config: %w", err)
	}
	remotes, err := parseRemotes(data)
	if err != nil {
		return nil, nil
	}
	return remotes, nil
}

// parseRemotes returns the remotes of a git config file: the first url of
// every remote, sorted by name. It follows git's config syntax (config.c):
// section and key names are case-insensitive, a quoted subsection is taken as
// written, [remote.name] is the old form of [remote "name"] (name lowercased),
// # and ; start comments outside quotes, and a value may be quoted, escaped
// and continued on the next line. What git would refuse is an error.
func parseRemotes(data []byte) ([]Remote, error) {
	r := &configReader{data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))}
	urls := map[string]string{}
	var section, subsection string
	comment := false
	for {
		c := r.next()
		switch {
		case c == '\n':
			if r.eof {
				var remotes []Remote
				for name, url := range urls {
					remotes = append(remotes, Remote{Name: name, URL: url})
				}
				slices.SortFunc(remotes, func(a, b Remote) int { return strings.Compare(a.Name, b.Name) })
				return remotes, nil
			}
			comment = false
		case comment || isConfigSpace(c):
		case c == '#' || c == ';':
			comment = true
		case c == '[':
			var err error
			if section, subsection, err = r.sectionHeader(); err != nil {
				return nil, err
			}
		case isAlpha(c):
			key, value, err := r.variable(c)
			if err != nil {
				return nil, err
			}
			if section == "remote" && subsection != "" && key == "url" && value != "" {
				if _, ok := urls[subsection]; !ok {
					urls[subsection] = value
				}
			}
		default:
			return nil, fmt.Errorf("bad config line %d", r.line+1)
		}
	}
}

// configReader reads a config file a byte at a time the way git does: "\r\n"
// reads as '\n', and the end of the file as a last '\n' with eof set.
type configReader struct {
	data []byte
	pos  int
	line int
	eof  bool
}

func (r *configReader) next() byte {
	if r.pos >= len(r.data) {
		r.eof = true
		return '\n'
	}
	c := r.data[r.pos]
	r.pos++
	if c == '\r' && r.pos < len(r.data) && r.data[r.pos] == '\n' {
		r.pos++
		c = '\n'
	}
	if c == '\n' {
		r.line++
	}
	return c
}

// sectionHeader reads what follows '[': the lowercased section name and the
// subsection ("" when there is none).
func (r *configReader) sectionHeader() (section, subsection string, err error) {
	var name []byte
	for {
		c := r.next()
		switch {
		case r.eof || c == ']' && len(name) == 0:
			return "", "", fmt.Errorf("bad section header on line %d", r.line+1)
		case c == ']':
			section, subsection, _ = strings.Cut(string(name), ".")
			return section, subsection, nil
		case isConfigSpace(c) && len(name) > 0:
			sub, err := r.quotedSubsection(c)
			if err != nil {
				return "", "", fmt.Errorf("section header on line %d: %w", r.line+1, err)
			}
			return string(name), sub, nil
		case isKeyChar(c) || c == '.':
			name = append(name, toLower(c))
		default:
			return "", "", fmt.Errorf("bad section header on line %d", r.line+1)
		}
	}
}

// quotedSubsection reads ` "subsection"]` from the space after the section
// name. A backslash takes the next character as written.
func (r *configReader) quotedSubsection(c byte) (string, error) {
	for isConfigSpace(c) {
		if c == '\n' {
			return "", errors.New("header ends early")
		}
		c = r.next()
	}
	if c != '"' {
		return "", errors.New("subsection not quoted")
	}
	var sub []byte
	for {
		c := r.next()
		if c == '\\' {
			c = r.next()
		} else if c == '"' {
			break
		}
		if c == '\n' {
			return "", errors.New("header ends early")
		}
		sub = append(sub, c)
	}
	if r.next() != ']' {
		return "", errors.New("no ] after subsection")
	}
	return string(sub), nil
}

// variable reads a "key = value" line from its first character, returning the
// lowercased key. A key alone (a boolean) has an empty value.
func (r *configReader) variable(first byte) (key, value string, err error) {
	name := []byte{toLower(first)}
	c := r.next()
	for ; isKeyChar(c); c = r.next() {
		name = append(name, toLower(c))
	}
	for c == ' ' || c == '\t' {
		c = r.next()
	}
	if c == '\n' {
		return string(name), "", nil
	}
	if c != '=' {
		return "", "", fmt.Errorf("bad config line %d", r.line+1)
	}
	value, err = r.value()
	return string(name), value, err
}

// value reads a value up to the end of its line: surrounding whitespace is
// dropped, inner whitespace outside quotes becomes one space per character,
// and only the escapes git knows are accepted.
func (r *configReader) value() (string, error) {
	var v []byte
	quoted, comment := false, false
	spaces := 0
	for {
		c := r.next()
		if c == '\n' {
			if quoted {
				return "", fmt.Errorf("unterminated quote before line %d", r.line+1)
			}
			return string(v), nil
		}
		if comment {
			continue
		}
		if !quoted {
			if isConfigSpace(c) {
				if len(v) > 0 {
					spaces++
				}
				continue
			}
			if c == '#' || c == ';' {
				comment = true
				continue
			}
		}
		for ; spaces > 0; spaces-- {
			v = append(v, ' ')
		}
		switch c {
		case '"':
			quoted = !quoted
			continue
		case '\\':
			switch c = r.next(); c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", fmt.Errorf("unknown escape \\%c on line %d", c, r.line+1)
			}
		}
		v = append(v, c)
	}
}

func isConfigSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isKeyChar(c byte) bool { return isAlpha(c) || '0' <= c && c <= '9' || c == '-' }

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
