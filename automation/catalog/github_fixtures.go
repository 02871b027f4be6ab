package catalog

import "strconv"

// The objects GitHub webhook payloads are made of, as schemas and as sample values. The samples
// tell one story: in the organisation "acme", mlopez opens pull request #482 on "acme/widgets",
// kchen reviews it, CI fails then passes, it is merged and v1.8.0 is released.

const (
	baseSHA      = "6180ea215bf3410eb839c850d2da67c71ce4dd43" // main before the merge
	headSHA      = "9e26286d2b63f80494f74e7a4ea28e17bd0c24c4" // the pull request as opened
	syncSHA      = "f265619ec111d91549105090809a992ba320c83d" // after a new commit was pushed
	mergeSHA     = "9f738fc806967da6652244699e47fccfad0f810e"
	pushTreeSHA  = "d3856ce5826a33341f8485253a640fe336b50282"
	mergeTreeSHA = "7b8a1339d8822b03dad981166b203744da72436d"
	repoAPI      = "https://api.github.com/repos/acme/widgets"
	repoHTML     = "https://github.com/acme/widgets"
	prTitle      = "Retry webhook deliveries with backoff"
	prBody       = "Failed deliveries are retried with exponential backoff (1s, doubling, capped at 5m).\n\nCloses #471."
)

var userSchema = object(obj{
	"login":    str("The account's handle, e.g. octocat."),
	"id":       integer(""),
	"type":     enum("", "User", "Organization", "Bot"),
	"html_url": str(""),
}, "login", "id")

var repositorySchema = object(obj{
	"id":             integer(""),
	"node_id":        str("GraphQL node id."),
	"name":           str("Repository name without the owner."),
	"full_name":      str("owner/name, e.g. acme/widgets."),
	"private":        boolean(""),
	"owner":          userSchema,
	"html_url":       str(""),
	"clone_url":      str("HTTPS clone URL."),
	"default_branch": str(""),
}, "id", "name", "full_name", "owner")

var labelSchema = object(obj{
	"name":        str(""),
	"color":       str("Hex colour without #."),
	"description": orNull(str("")),
}, "name")

// commonSchema holds the envelope fields every repository event carries.
var commonSchema = obj{
	"repository":   repositorySchema,
	"organization": object(obj{"login": str(""), "id": integer("")}, "login"),
	"sender":       with(userSchema, obj{"description": "The account that caused the event."}),
	"installation": object(obj{"id": integer("The GitHub App installation that received the event.")}, "id"),
}

var gitRefSchema = object(obj{
	"label": str("owner:branch"),
	"ref":   str("Branch name."),
	"sha":   str("Commit SHA the branch points at."),
	"repo": orNull(object(obj{
		"full_name": str("Differs from the base repository's for a pull request from a fork."),
		"clone_url": str(""),
		"fork":      boolean(""),
	}, "full_name")),
}, "ref", "sha")

var pullRequestSchema = object(obj{
	"number":              integer(""),
	"title":               str(""),
	"body":                orNull(str("Description in Markdown.")),
	"state":               enum("", "open", "closed"),
	"draft":               boolean(""),
	"html_url":            str(""),
	"user":                userSchema,
	"labels":              arrayOf(labelSchema, ""),
	"requested_reviewers": arrayOf(userSchema, ""),
	"head":                gitRefSchema,
	"base":                gitRefSchema,
	"merged":              boolean("Present on full pull request objects; true once merged."),
	"merged_at":           orNull(str("")),
	"merge_commit_sha":    orNull(str("")),
	"author_association":  str("e.g. OWNER, MEMBER, CONTRIBUTOR, FIRST_TIME_CONTRIBUTOR."),
	"created_at":          str(""),
	"updated_at":          str(""),
	"closed_at":           orNull(str("")),
	"additions":           integer(""),
	"deletions":           integer(""),
	"changed_files":       integer(""),
}, "number", "title", "state", "html_url", "user", "head", "base")

var issueSchema = object(obj{
	"number":       integer(""),
	"title":        str(""),
	"body":         orNull(str("")),
	"state":        enum("", "open", "closed"),
	"state_reason": orNull(str("completed, not_planned or reopened.")),
	"html_url":     str(""),
	"user":         userSchema,
	"labels":       arrayOf(labelSchema, ""),
	"assignees":    arrayOf(userSchema, ""),
	"comments":     integer("Number of comments."),
	"pull_request": object(obj{"html_url": str(""), "merged_at": orNull(str(""))}),
	"created_at":   str(""),
	"closed_at":    orNull(str("")),
}, "number", "title", "state", "html_url", "user")

func user(login string, id int, nodeID, kind string) obj {
	return obj{
		"login":      login,
		"id":         id,
		"node_id":    nodeID,
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.Itoa(id) + "?v=4",
		"url":        "https://api.github.com/users/" + login,
		"html_url":   "https://github.com/" + login,
		"type":       kind,
		"site_admin": false,
	}
}

var (
	author   = user("mlopez", 1402856, "MDQ6VXNlcjE0MDI4NTY=", "User")
	reviewer = user("kchen", 2218543, "MDQ6VXNlcjIyMTg1NDM=", "User")
	acme     = user("acme", 98390127, "O_kgDOBd1Qbw", "Organization")
)

var organization = obj{
	"login":       "acme",
	"id":          98390127,
	"node_id":     "O_kgDOBd1Qbw",
	"url":         "https://api.github.com/orgs/acme",
	"repos_url":   "https://api.github.com/orgs/acme/repos",
	"hooks_url":   "https://api.github.com/orgs/acme/hooks",
	"issues_url":  "https://api.github.com/orgs/acme/issues",
	"members_url": "https://api.github.com/orgs/acme/members{/member}",
	"avatar_url":  "https://avatars.githubusercontent.com/u/98390127?v=4",
	"description": "Widgets, at scale.",
}

var installation = obj{"id": 41872613, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDE4NzI2MTM="}

var repository = obj{
	"id":                583431926,
	"node_id":           "R_kgDOIsZL9g",
	"name":              "widgets",
	"full_name":         "acme/widgets",
	"private":           true,
	"owner":             acme,
	"html_url":          repoHTML,
	"description":       "Widget service and its deploy tooling",
	"fork":              false,
	"url":               repoAPI,
	"pulls_url":         repoAPI + "/pulls{/number}",
	"issues_url":        repoAPI + "/issues{/number}",
	"git_url":           "git://github.com/acme/widgets.git",
	"ssh_url":           "git@github.com:acme/widgets.git",
	"clone_url":         repoHTML + ".git",
	"homepage":          nil,
	"created_at":        "2022-12-21T09:12:44Z",
	"updated_at":        "2024-05-02T08:01:13Z",
	"pushed_at":         "2024-05-02T08:00:59Z",
	"size":              4821,
	"stargazers_count":  12,
	"watchers_count":    12,
	"language":          "Go",
	"forks_count":       1,
	"archived":          false,
	"disabled":          false,
	"open_issues_count": 7,
	"topics":            []string{"go", "webhooks"},
	"visibility":        "private",
	"default_branch":    "main",
}

func label(id int, nodeID, name, color, description string) obj {
	return obj{
		"id":          id,
		"node_id":     nodeID,
		"url":         repoAPI + "/labels/" + name,
		"name":        name,
		"color":       color,
		"default":     name == "bug" || name == "enhancement",
		"description": description,
	}
}

var (
	enhancement = label(5131207741, "LA_kwDOIsZL9s8AAAABMdHCPQ", "enhancement", "a2eeef", "New feature or request")
	bug         = label(5131207735, "LA_kwDOIsZL9s8AAAABMdHCNw", "bug", "d73a4a", "Something isn't working")
)

func gitRef(branch, sha string) obj {
	return obj{"label": "acme:" + branch, "ref": branch, "sha": sha, "user": acme, "repo": repository}
}

// pullRequestState is what differs between the pull request samples.
type pullRequestState struct {
	head     string
	commits  int
	closed   bool
	merged   bool
	updated  string
	reviewed bool // in pull_request_review events GitHub sends the shorter pull request object
}

func pullRequest(st pullRequestState) obj {
	pr := obj{
		"url":                 repoAPI + "/pulls/482",
		"id":                  1862093517,
		"node_id":             "PR_kwDOIsZL9s5u_xHN",
		"html_url":            repoHTML + "/pull/482",
		"diff_url":            repoHTML + "/pull/482.diff",
		"patch_url":           repoHTML + "/pull/482.patch",
		"issue_url":           repoAPI + "/issues/482",
		"commits_url":         repoAPI + "/pulls/482/commits",
		"review_comments_url": repoAPI + "/pulls/482/comments",
		"statuses_url":        repoAPI + "/statuses/" + st.head,
		"number":              482,
		"state":               "open",
		"locked":              false,
		"title":               prTitle,
		"user":                author,
		"body":                prBody,
		"created_at":          "2024-05-02T08:01:12Z",
		"updated_at":          st.updated,
		"closed_at":           nil,
		"merged_at":           nil,
		"merge_commit_sha":    nil,
		"assignee":            nil,
		"assignees":           []obj{},
		"requested_reviewers": []obj{reviewer},
		"requested_teams":     []obj{},
		"labels":              []obj{enhancement},
		"milestone":           nil,
		"draft":               false,
		"head":                gitRef("retry-backoff", st.head),
		"base":                gitRef("main", baseSHA),
		"author_association":  "MEMBER",
		"auto_merge":          nil,
		"active_lock_reason":  nil,
	}
	if st.closed {
		pr["state"] = "closed"
		pr["closed_at"] = st.updated
		pr["requested_reviewers"] = []obj{}
	}
	if st.merged {
		pr["merged_at"] = st.updated
		pr["merge_commit_sha"] = mergeSHA
	}
	if st.reviewed {
		return pr
	}
	var mergedBy any
	if st.merged {
		mergedBy = reviewer
	}
	return with(pr, obj{
		"merged":                st.merged,
		"mergeable":             nil,
		"rebaseable":            nil,
		"mergeable_state":       "unknown",
		"merged_by":             mergedBy,
		"comments":              1,
		"review_comments":       0,
		"maintainer_can_modify": false,
		"commits":               st.commits,
		"additions":             128 + 14*(st.commits-3),
		"deletions":             17,
		"changed_files":         5,
	})
}

var (
	openedPR = pullRequestState{head: headSHA, commits: 3, updated: "2024-05-02T08:01:12Z"}
	syncedPR = pullRequestState{head: syncSHA, commits: 4, updated: "2024-05-02T09:40:27Z"}
	mergedPR = pullRequestState{head: syncSHA, commits: 4, closed: true, merged: true, updated: "2024-05-02T11:05:51Z"}
)

// reactions is the reaction summary GitHub attaches to issues and comments.
func reactions(url string) obj {
	return obj{"url": url + "/reactions", "total_count": 0, "+1": 0, "-1": 0, "laugh": 0,
		"hooray": 0, "confused": 0, "heart": 0, "rocket": 0, "eyes": 0}
}

func issue(number int, title, body string, labels []obj, closed bool) obj {
	api := repoAPI + "/issues/" + strconv.Itoa(number)
	is := obj{
		"url":                api,
		"repository_url":     repoAPI,
		"labels_url":         api + "/labels{/name}",
		"comments_url":       api + "/comments",
		"events_url":         api + "/events",
		"html_url":           repoHTML + "/issues/" + strconv.Itoa(number),
		"id":                 2274581459 + number,
		"node_id":            "I_kwDOIsZL9s6Hk3yq",
		"number":             number,
		"title":              title,
		"user":               author,
		"labels":             labels,
		"state":              "open",
		"locked":             false,
		"assignee":           nil,
		"assignees":          []obj{},
		"milestone":          nil,
		"comments":           2,
		"created_at":         "2024-04-29T14:22:05Z",
		"updated_at":         "2024-04-30T07:10:41Z",
		"closed_at":          nil,
		"author_association": "MEMBER",
		"active_lock_reason": nil,
		"body":               body,
		"reactions":          reactions(api),
		"timeline_url":       api + "/timeline",
		"state_reason":       nil,
	}
	if closed {
		is["state"] = "closed"
		is["state_reason"] = "completed"
		is["closed_at"] = "2024-05-02T11:05:52Z"
		is["updated_at"] = "2024-05-02T11:05:52Z"
	}
	return is
}

const droppedDeliveries = "Deliveries are dropped when the receiver restarts"

var droppedDeliveriesBody = "When the receiver restarts mid-delivery the event is acknowledged but never processed.\n\n" +
	"Steps:\n1. Send a burst of events\n2. Restart the receiver\n3. Compare counts"

// commit is one commit of a push payload.
func commit(sha, tree, message, timestamp string, modified ...string) obj {
	return obj{
		"id":        sha,
		"tree_id":   tree,
		"distinct":  true,
		"message":   message,
		"timestamp": timestamp,
		"url":       repoHTML + "/commit/" + sha,
		"author":    obj{"name": "Maria Lopez", "email": "mlopez@acme.dev", "username": "mlopez"},
		"committer": obj{"name": "Maria Lopez", "email": "mlopez@acme.dev", "username": "mlopez"},
		"added":     []string{},
		"removed":   []string{},
		"modified":  modified,
	}
}

// actionsApp is the GitHub App behind Actions check runs.
var actionsApp = obj{
	"id":           15368,
	"slug":         "github-actions",
	"node_id":      "MDM6QXBwMTUzNjg=",
	"name":         "GitHub Actions",
	"description":  "Automate your workflow from idea to production",
	"external_url": "https://help.github.com/en/actions",
	"html_url":     "https://github.com/apps/github-actions",
	"created_at":   "2018-07-30T09:30:17Z",
	"updated_at":   "2019-12-10T19:04:12Z",
}

// prLink is the short pull request reference in check and workflow payloads.
var prLink = obj{
	"url":    repoAPI + "/pulls/482",
	"id":     1862093517,
	"number": 482,
	"head":   obj{"ref": "retry-backoff", "sha": syncSHA, "repo": obj{"id": 583431926, "url": repoAPI, "name": "widgets"}},
	"base":   obj{"ref": "main", "sha": baseSHA, "repo": obj{"id": 583431926, "url": repoAPI, "name": "widgets"}},
}

var prLinkSchema = object(obj{
	"number": integer(""),
	"head":   object(obj{"ref": str(""), "sha": str("")}, "ref", "sha"),
	"base":   object(obj{"ref": str(""), "sha": str("")}, "ref", "sha"),
}, "number", "head", "base")
