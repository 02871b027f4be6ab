package images_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// layerOp adds something to an unpacked layer directory, the way the unpacker
// would have left it.
type layerOp func(t *testing.T, root string)

func file(rel, content string) layerOp {
	return func(t *testing.T, root string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func dir(rel string) layerOp {
	return func(t *testing.T, root string) {
		if err := os.MkdirAll(filepath.Join(root, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// gitRepo makes rel a repository with the given .git/config.
func gitRepo(rel, config string) layerOp {
	return func(t *testing.T, root string) {
		file(filepath.Join(rel, ".git/config"), config)(t, root)
		file(filepath.Join(rel, ".git/HEAD"), "ref: refs/heads/main\n")(t, root)
		dir(filepath.Join(rel, ".git/objects"))(t, root)
	}
}

func symlink(rel, target string) layerOp {
	return func(t *testing.T, root string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

// whiteout is how the unpacker leaves a .wh. entry: a 0:0 character device.
func whiteout(rel string) layerOp {
	return func(t *testing.T, root string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// opaqueDir is how the unpacker leaves a .wh..wh..opq entry.
func opaqueDir(rel string) layerOp {
	return func(t *testing.T, root string) {
		dir(rel)(t, root)
		if err := unix.Setxattr(filepath.Join(root, rel), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func remoteConfig(remotes ...images.Remote) string {
	var b strings.Builder
	b.WriteString("[core]\n\trepositoryformatversion = 0\n")
	for _, r := range remotes {
		fmt.Fprintf(&b, "[remote %q]\n\turl = %s\n\tfetch = +refs/heads/*:refs/remotes/%s/*\n", r.Name, r.URL, r.Name)
	}
	return b.String()
}

// findRepos builds one layer directory per element of layers (top first) and
// runs FindRepos over them.
func findRepos(t *testing.T, layers ...[]layerOp) []images.Repo {
	t.Helper()
	var dirs []string
	for _, ops := range layers {
		root := t.TempDir()
		for _, op := range ops {
			op(t, root)
		}
		dirs = append(dirs, root)
	}
	repos, err := images.FindRepos(&images.Image{LowerDirs: dirs})
	if err != nil {
		t.Fatalf("FindRepos: %v", err)
	}
	return repos
}

var (
	origin   = images.Remote{Name: "origin", URL: "https://github.com/hangar-dev/app.git"}
	upstream = images.Remote{Name: "upstream", URL: "git@github.com:upstream/app.git"}
)

func TestFindReposSeesTheMergedFileSystem(t *testing.T) {
	requireRoot(t)
	hostRepo := func(t *testing.T, root string) {
		host := t.TempDir()
		gitRepo("", remoteConfig(origin))(t, host)
		symlink("hostlink", host)(t, root)
	}
	manyRepos := func(n int) layerOp {
		return func(t *testing.T, root string) {
			for i := range n {
				gitRepo(fmt.Sprintf("many/r%03d", i), "")(t, root)
			}
		}
	}
	var first100 []images.Repo
	for i := range 100 {
		first100 = append(first100, images.Repo{Path: fmt.Sprintf("/many/r%03d", i)})
	}

	tests := []struct {
		name   string
		layers [][]layerOp // top first
		want   []images.Repo
	}{
		{
			name:   "repo with origin and upstream reports both sorted by name",
			layers: [][]layerOp{{gitRepo("src/app", remoteConfig(upstream, origin))}},
			want:   []images.Repo{{Path: "/src/app", Remotes: []images.Remote{origin, upstream}}},
		},
		{
			name: "repos are sorted by path across layers",
			layers: [][]layerOp{
				{gitRepo("work/b", "")},
				{gitRepo("work/a", ""), gitRepo("opt/c", "")},
			},
			want: []images.Repo{{Path: "/opt/c"}, {Path: "/work/a"}, {Path: "/work/b"}},
		},
		{
			name:   "repo at the root",
			layers: [][]layerOp{{gitRepo("", remoteConfig(origin))}},
			want:   []images.Repo{{Path: "/", Remotes: []images.Remote{origin}}},
		},
		{
			name: "whiteout in an upper layer hides a repo",
			layers: [][]layerOp{
				{whiteout("src/gone")},
				{gitRepo("src/gone", remoteConfig(origin)), gitRepo("src/kept", "")},
			},
			want: []images.Repo{{Path: "/src/kept"}},
		},
		{
			name: "whiteout of .git/config in an upper layer unmakes the repo",
			layers: [][]layerOp{
				{whiteout("src/app/.git/config")},
				{gitRepo("src/app", remoteConfig(origin))},
			},
		},
		{
			name: "opaque directory hides the repos of the layers below",
			layers: [][]layerOp{
				{opaqueDir("work"), gitRepo("work/new", "")},
				{gitRepo("work/old", "")},
			},
			want: []images.Repo{{Path: "/work/new"}},
		},
		{
			name: "opaque directory in a middle layer hides the layers below it",
			layers: [][]layerOp{
				{gitRepo("work/top", "")},
				{opaqueDir("work"), gitRepo("work/middle", "")},
				{gitRepo("work/bottom", "")},
			},
			want: []images.Repo{{Path: "/work/middle"}, {Path: "/work/top"}},
		},
		{
			name: "file in a middle layer ends the directory merge",
			layers: [][]layerOp{
				{gitRepo("opt/top", "")},
				{file("opt", "not a dir")},
				{gitRepo("opt/bottom", "")},
			},
			want: []images.Repo{{Path: "/opt/top"}},
		},
		{
			name: "file in an upper layer hides a directory below",
			layers: [][]layerOp{
				{file("opt/app", "not a dir")},
				{gitRepo("opt/app", "")},
			},
		},
		{
			name: "upper layer config wins",
			layers: [][]layerOp{
				{file("src/app/.git/config", remoteConfig(upstream))},
				{gitRepo("src/app", remoteConfig(origin))},
			},
			want: []images.Repo{{Path: "/src/app", Remotes: []images.Remote{upstream}}},
		},
		{
			name: "symlinks are not followed",
			layers: [][]layerOp{{
				gitRepo("src/app", ""),
				symlink("abs", "/src/app"),
				symlink("rel", "src/app"),
				symlink("gitlink/.git", "../src/app/.git"),
				dir("cfglink/.git"),
				symlink("cfglink/.git/config", "../../src/app/.git/config"),
				hostRepo,
			}},
			want: []images.Repo{{Path: "/src/app"}},
		},
		{
			name: "repos under /proc, /sys and /dev are skipped",
			layers: [][]layerOp{{
				gitRepo("proc/1/root", ""), gitRepo("sys/x", ""), gitRepo("dev/y", ""),
				gitRepo("srv/proc", ""),
			}},
			want: []images.Repo{{Path: "/srv/proc"}},
		},
		{
			name: "nested repos report only the outer one",
			layers: [][]layerOp{{
				gitRepo("src/outer", remoteConfig(origin)),
				gitRepo("src/outer/vendor/inner", remoteConfig(upstream)),
				gitRepo("src/outer/.git/modules/sub", ""),
			}},
			want: []images.Repo{{Path: "/src/outer", Remotes: []images.Remote{origin}}},
		},
		{
			name: ".git without config is no repo and the search goes on below it",
			layers: [][]layerOp{{
				dir("src/x/.git/objects"),
				gitRepo("src/x/sub", ""),
			}},
			want: []images.Repo{{Path: "/src/x/sub"}},
		},
		{
			name: "bare repo needs config, HEAD and objects",
			layers: [][]layerOp{{
				file("srv/git/app.git/config", "[core]\n\tbare = true\n"+remoteConfig(origin)),
				file("srv/git/app.git/HEAD", "ref: refs/heads/main\n"),
				dir("srv/git/app.git/objects"),
				file("srv/git/half.git/config", ""),
				file("srv/git/half.git/HEAD", ""),
			}},
			want: []images.Repo{{Path: "/srv/git/app.git", Remotes: []images.Remote{origin}}},
		},
		{
			name:   "malformed config gives a repo without remotes",
			layers: [][]layerOp{{gitRepo("src/app", "[remote \"origin\"\n\turl = https://example.com/x.git\n")}},
			want:   []images.Repo{{Path: "/src/app"}},
		},
		{
			name: "search stops eight levels down",
			layers: [][]layerOp{{
				gitRepo("1/2/3/4/5/6/7/8", ""),
				gitRepo("a/2/3/4/5/6/7/8/9", ""),
			}},
			want: []images.Repo{{Path: "/1/2/3/4/5/6/7/8"}},
		},
		{
			name:   "search stops at 100 repos",
			layers: [][]layerOp{{manyRepos(150)}},
			want:   first100,
		},
		{
			name:   "image without repos",
			layers: [][]layerOp{{dir("bin"), file("etc/passwd", "root:x:0:0::/root:/bin/sh\n")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := findRepos(t, tt.layers...); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FindRepos = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestFindReposReadsRemotesLikeGit(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   []images.Remote // nil: a config git would refuse
	}{
		{name: "section and key names are case-insensitive",
			config: "[REMOTE \"origin\"]\n\tURL = https://a/x.git\n",
			want:   []images.Remote{{"origin", "https://a/x.git"}}},
		{name: "quoted subsection keeps its case",
			config: "[remote \"Origin\"]\nurl = u\n",
			want:   []images.Remote{{"Origin", "u"}}},
		{name: "dotted subsection is lowercased",
			config: "[remote.Upstream]\nurl = u\n",
			want:   []images.Remote{{"upstream", "u"}}},
		{name: "escapes in a subsection",
			config: "[remote \"a\\\"b\\\\c\"]\nurl = u\n",
			want:   []images.Remote{{`a"b\c`, "u"}}},
		{name: "comments and surrounding whitespace",
			config: "# top\n; also\n  [remote \"o\"]  # after header\n \t url   =   https://x/y.git   # trailing\n",
			want:   []images.Remote{{"o", "https://x/y.git"}}},
		{name: "quoted value keeps spaces and comment characters",
			config: "[remote \"o\"]\nurl = \"/srv/my repo;#1\"\n",
			want:   []images.Remote{{"o", "/srv/my repo;#1"}}},
		{name: "value escapes",
			config: "[remote \"o\"]\nurl = a\\\"b\\\\c\n",
			want:   []images.Remote{{"o", `a"b\c`}}},
		{name: "line continuation",
			config: "[remote \"o\"]\nurl = https://exa\\\nmple.com/x.git\n",
			want:   []images.Remote{{"o", "https://example.com/x.git"}}},
		{name: "key on the header line",
			config: "[remote \"o\"] url = u\n",
			want:   []images.Remote{{"o", "u"}}},
		{name: "first url wins, also across sections of the same remote",
			config: "[remote \"o\"]\nurl = first\nurl = second\n[remote \"o\"]\nurl = third\n",
			want:   []images.Remote{{"o", "first"}}},
		{name: "CRLF line endings, byte order mark and no final newline",
			config: "\xef\xbb\xbf[remote \"o\"]\r\n\turl = u\r\n[remote \"p\"]\r\n\turl = v",
			want:   []images.Remote{{"o", "u"}, {"p", "v"}}},
		{name: "remote without url and other sections are left out",
			config: "url = top\n[core]\nurl = core\n[remote]\nurl = bare\n[branch \"main\"]\nremote = o\n[remote \"nourl\"]\nfetch = x\n[remote \"empty\"]\nurl =\n[remote \"bool\"]\nurl\n",
		},
		{name: "unterminated section header", config: "[remote \"o\"\nurl = u\n"},
		{name: "unquoted subsection", config: "[remote o]\nurl = u\n"},
		{name: "space before ]", config: "[remote \"o\" ]\nurl = u\n"},
		{name: "unknown escape", config: "[remote \"o\"]\nurl = a\\qb\n"},
		{name: "unterminated quote", config: "[remote \"o\"]\nurl = \"u\n"},
		{name: "key without =", config: "[remote \"o\"]\nurl u\n"},
		{name: "garbage line", config: "[remote \"o\"]\nurl = u\n%%%\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := findRepos(t, []layerOp{gitRepo("r", tt.config)})
			want := []images.Repo{{Path: "/r", Remotes: tt.want}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("FindRepos = %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestFindReposInPulledImage(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	img := busybox(t, map[string]images.File{
		"/src/app/.git/config": {Content: []byte(remoteConfig(origin))},
		"/src/app/.git/HEAD":   {Content: []byte("ref: refs/heads/main\n")},
		"/src/app/main.go":     {Content: []byte("package main\n")},
	})
	ref := imagestest.Push(t, host, "withrepo", img)

	pulled := pull(t, newCache(t, t.TempDir()), ref)
	repos, err := images.FindRepos(pulled)
	if err != nil {
		t.Fatal(err)
	}
	want := []images.Repo{{Path: "/src/app", Remotes: []images.Remote{origin}}}
	if !reflect.DeepEqual(repos, want) {
		t.Errorf("FindRepos = %+v, want %+v", repos, want)
	}
}
