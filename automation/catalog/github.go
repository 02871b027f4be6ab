package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
)

// ProviderGitHub is the provider of GitHub webhook events.
const ProviderGitHub = "github"

// gitHubName is the shape of GitHub's event names (X-GitHub-Event) and actions.
var gitHubName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// EventKey derives the event key of a GitHub webhook delivery: "github.<X-GitHub-Event>", then
// ".<action>" when the payload has a top-level string "action" (e.g.
// "github.pull_request.opened", "github.push"). It fails on a payload that is not a JSON object
// and on an event or action that is not a GitHub-shaped name, so that no sender can make up
// keys with dots or odd characters in them.
func EventKey(githubEvent string, payload []byte) (string, error) {
	event := strings.TrimSpace(githubEvent)
	if !gitHubName.MatchString(event) {
		return "", fmt.Errorf("X-GitHub-Event %q is not a GitHub event name", githubEvent)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(payload, &body); err != nil || body == nil {
		return "", errors.New("the payload is not a JSON object")
	}
	var action string
	if raw, ok := body["action"]; ok && json.Unmarshal(raw, &action) != nil {
		// Not a string: no GitHub event has such an action, so it names nothing.
		action = ""
	}
	switch {
	case action == "":
		return ProviderGitHub + "." + event, nil
	case !gitHubName.MatchString(action):
		return "", fmt.Errorf("payload action %q is not a GitHub action name", action)
	}
	return ProviderGitHub + "." + event + "." + action, nil
}

// githubEvent is one GitHub catalog entry before rendering: the event-specific parts of its
// schema and sample; the envelope (repository, organization, sender, installation, action) is
// added to every one.
type githubEvent struct {
	event, action      string
	label, description string
	subject, predicate string
	hidden             bool
	props              obj
	required           []string
	sample             obj
}

func (g githubEvent) render() Event {
	key := ProviderGitHub + "." + g.event
	props := maps.Clone(commonSchema)
	maps.Copy(props, g.props)
	required := []string{"repository", "sender"}
	sample := obj{"repository": repository, "organization": organization, "sender": author, "installation": installation}
	if g.action != "" {
		key += "." + g.action
		props["action"] = constant(g.action, "The activity that happened; part of the event key.")
		required = append(required, "action")
		sample["action"] = g.action
	}
	maps.Copy(sample, g.sample)
	return Event{
		Key:         key,
		Label:       g.label,
		Description: g.description,
		SchemaJSON:  mustJSON(eventSchema(g.label, props, append(required, g.required...)...)),
		SampleJSON:  mustJSON(sample),
		Hidden:      g.hidden,
		subject:     g.subject,
		predicate:   g.predicate,
	}
}

func githubEvents() []Event {
	prProps := obj{"number": integer("The pull request number."), "pull_request": pullRequestSchema}
	prRequired := []string{"number", "pull_request"}
	const prSubject = "a GitHub pull request is"
	const issueSubject = "a GitHub issue is"
	// A comment on a pull request arrives with the pull request as an issue.
	prComment := with(issue(482, prTitle, prBody, []obj{enhancement}, false), obj{
		"node_id":    "PR_kwDOIsZL9s5u_xHN",
		"html_url":   repoHTML + "/pull/482",
		"created_at": "2024-05-02T08:01:12Z",
		"updated_at": "2024-05-02T09:12:40Z",
		"pull_request": obj{
			"url":       repoAPI + "/pulls/482",
			"html_url":  repoHTML + "/pull/482",
			"diff_url":  repoHTML + "/pull/482.diff",
			"patch_url": repoHTML + "/pull/482.patch",
			"merged_at": nil,
		},
	})
	specs := []githubEvent{
		{
			event: "pull_request", action: "opened",
			label:       "Pull request opened",
			description: "A pull request was opened, as a draft or ready for review.",
			subject:     prSubject, predicate: "opened",
			props: prProps, required: prRequired,
			sample: obj{"number": 482, "pull_request": pullRequest(openedPR)},
		},
		{
			event: "pull_request", action: "synchronize",
			label:       "Pull request synchronized",
			description: "New commits were pushed to a pull request's head branch (or it was force-pushed or rebased); before and after are the old and new head SHAs.",
			subject:     prSubject, predicate: "updated with new commits",
			props:    with(prProps, obj{"before": str("Head SHA before the push."), "after": str("Head SHA after the push.")}),
			required: append(prRequired, "before", "after"),
			sample:   obj{"number": 482, "pull_request": pullRequest(syncedPR), "before": headSHA, "after": syncSHA},
		},
		{
			event: "pull_request", action: "closed",
			label:       "Pull request closed",
			description: "A pull request was closed; pull_request.merged says whether it was merged.",
			subject:     prSubject, predicate: "closed",
			props: prProps, required: prRequired,
			sample: obj{"number": 482, "pull_request": pullRequest(mergedPR), "sender": reviewer},
		},
		{
			event: "pull_request", action: "reopened",
			label:       "Pull request reopened",
			description: "A closed, unmerged pull request was reopened.",
			subject:     prSubject, predicate: "reopened",
			props: prProps, required: prRequired,
			sample: obj{"number": 482, "pull_request": pullRequest(pullRequestState{head: syncSHA, commits: 4, updated: "2024-05-02T10:02:10Z"})},
		},
		{
			event: "pull_request", action: "ready_for_review",
			label:       "Pull request ready for review",
			description: "A draft pull request was marked ready for review.",
			subject:     prSubject, predicate: "marked ready for review",
			props: prProps, required: prRequired,
			sample: obj{"number": 482, "pull_request": pullRequest(openedPR)},
		},
		{
			event: "pull_request_review", action: "submitted",
			label:       "Pull request review submitted",
			description: "A review was submitted on a pull request; review.state is approved, changes_requested or commented.",
			subject:     "a GitHub pull request review is", predicate: "submitted",
			props: obj{
				"review": object(obj{
					"id":                 integer(""),
					"user":               userSchema,
					"body":               orNull(str("")),
					"state":              enum("", "approved", "changes_requested", "commented", "dismissed"),
					"commit_id":          str("The commit the review is on."),
					"html_url":           str(""),
					"submitted_at":       str(""),
					"author_association": str(""),
				}, "id", "user", "state", "commit_id"),
				"pull_request": pullRequestSchema,
			},
			required: []string{"review", "pull_request"},
			sample: obj{
				"sender":       reviewer,
				"pull_request": pullRequest(pullRequestState{head: syncSHA, commits: 4, updated: "2024-05-02T10:31:08Z", reviewed: true}),
				"review": obj{
					"id":                 2034567891,
					"node_id":            "PRR_kwDOIsZL9s55RZ7T",
					"user":               reviewer,
					"body":               "Looks good. One nit: cap the jitter as well as the delay.",
					"commit_id":          syncSHA,
					"submitted_at":       "2024-05-02T10:31:07Z",
					"state":              "approved",
					"html_url":           repoHTML + "/pull/482#pullrequestreview-2034567891",
					"pull_request_url":   repoAPI + "/pulls/482",
					"author_association": "MEMBER",
					"_links": obj{
						"html":         obj{"href": repoHTML + "/pull/482#pullrequestreview-2034567891"},
						"pull_request": obj{"href": repoAPI + "/pulls/482"},
					},
				},
			},
		},
		{
			event: "issue_comment", action: "created",
			label:       "Issue or pull request comment created",
			description: "Someone commented on an issue or a pull request's conversation; issue.pull_request is present when it is a pull request.",
			subject:     "someone", predicate: "comments on a GitHub issue or pull request",
			props: obj{
				"issue": issueSchema,
				"comment": object(obj{
					"id":                 integer(""),
					"body":               str("The comment in Markdown."),
					"user":               userSchema,
					"html_url":           str(""),
					"author_association": str(""),
					"created_at":         str(""),
				}, "id", "body", "user"),
			},
			required: []string{"issue", "comment"},
			sample: obj{
				"sender": reviewer,
				"issue":  prComment,
				"comment": obj{
					"url":                      repoAPI + "/issues/comments/2089134577",
					"html_url":                 repoHTML + "/pull/482#issuecomment-2089134577",
					"issue_url":                repoAPI + "/issues/482",
					"id":                       2089134577,
					"node_id":                  "IC_kwDOIsZL9s58hYxx",
					"user":                     reviewer,
					"created_at":               "2024-05-02T09:12:40Z",
					"updated_at":               "2024-05-02T09:12:40Z",
					"author_association":       "MEMBER",
					"body":                     "/hangar review",
					"reactions":                reactions(repoAPI + "/issues/comments/2089134577"),
					"performed_via_github_app": nil,
				},
			},
		},
		{
			event: "issues", action: "opened",
			label:       "Issue opened",
			description: "An issue was opened.",
			subject:     issueSubject, predicate: "opened",
			props: obj{"issue": issueSchema}, required: []string{"issue"},
			sample: obj{"issue": issue(471, droppedDeliveries, droppedDeliveriesBody, []obj{}, false)},
		},
		{
			event: "issues", action: "closed",
			label:       "Issue closed",
			description: "An issue was closed; issue.state_reason says whether it was completed or not planned.",
			subject:     issueSubject, predicate: "closed",
			props: obj{"issue": issueSchema}, required: []string{"issue"},
			sample: obj{"issue": issue(471, droppedDeliveries, droppedDeliveriesBody, []obj{bug}, true)},
		},
		{
			event: "issues", action: "labeled",
			label:       "Issue labeled",
			description: "A label was added to an issue; label is the one added.",
			subject:     issueSubject, predicate: "labeled",
			props: obj{"issue": issueSchema, "label": labelSchema}, required: []string{"issue", "label"},
			sample: obj{"issue": issue(471, droppedDeliveries, droppedDeliveriesBody, []obj{bug}, false), "label": bug},
		},
		{
			event:       "push",
			label:       "Push",
			description: "Commits or a tag were pushed; ref is the full ref (refs/heads/main), before and after the old and new SHAs; deleted is true for a deleted branch.",
			subject:     "commits are", predicate: "pushed to a GitHub repository",
			props: obj{
				"ref":     str("Full ref, e.g. refs/heads/main or refs/tags/v1.8.0."),
				"before":  str("SHA before the push; all zeros for a new branch."),
				"after":   str("SHA after the push; all zeros for a deleted branch."),
				"created": boolean(""),
				"deleted": boolean(""),
				"forced":  boolean(""),
				"compare": str("URL comparing before and after."),
				"commits": arrayOf(object(obj{
					"id":       str(""),
					"message":  str(""),
					"author":   object(obj{"name": str(""), "email": str(""), "username": str("")}, "name"),
					"added":    arrayOf(str(""), ""),
					"removed":  arrayOf(str(""), ""),
					"modified": arrayOf(str(""), ""),
				}, "id", "message"), "Up to 20 commits, oldest first."),
				"head_commit": orNull(object(obj{"id": str(""), "message": str("")}, "id")),
				"pusher":      object(obj{"name": str(""), "email": orNull(str(""))}, "name"),
			},
			required: []string{"ref", "before", "after", "commits", "pusher"},
			sample: func() obj {
				merge := commit(mergeSHA, mergeTreeSHA, prTitle+" (#482)", "2024-05-02T13:05:50+02:00",
					"internal/delivery/retry.go", "internal/delivery/retry_test.go", "README.md")
				// Push payloads carry the repository with timestamps as Unix seconds.
				pushed := with(repository, obj{"created_at": 1671613964, "pushed_at": 1714647950})
				return obj{
					"ref":         "refs/heads/main",
					"before":      baseSHA,
					"after":       mergeSHA,
					"repository":  pushed,
					"pusher":      obj{"name": "kchen", "email": "kchen@acme.dev"},
					"sender":      reviewer,
					"created":     false,
					"deleted":     false,
					"forced":      false,
					"base_ref":    nil,
					"compare":     repoHTML + "/compare/" + baseSHA[:12] + "..." + mergeSHA[:12],
					"commits":     []obj{merge},
					"head_commit": merge,
				}
			}(),
		},
		{
			event: "check_run", action: "completed",
			label:       "Check run completed",
			description: "A check run (a CI job such as a GitHub Actions job) finished; check_run.conclusion is success, failure, cancelled, timed_out, neutral, skipped or action_required.",
			subject:     "a GitHub check run", predicate: "completes",
			props: obj{"check_run": object(obj{
				"id":          integer(""),
				"name":        str("e.g. test (ubuntu-latest)."),
				"head_sha":    str(""),
				"status":      constant("completed", ""),
				"conclusion":  enum("", "success", "failure", "neutral", "cancelled", "timed_out", "action_required", "skipped", "stale"),
				"html_url":    str(""),
				"details_url": orNull(str("")),
				"output": object(obj{
					"title":   orNull(str("")),
					"summary": orNull(str("")),
				}),
				"check_suite":   object(obj{"id": integer(""), "head_branch": orNull(str(""))}, "id"),
				"app":           object(obj{"slug": str(""), "name": str("")}, "slug"),
				"pull_requests": arrayOf(prLinkSchema, "Open pull requests whose head is head_sha."),
			}, "id", "name", "head_sha", "status", "conclusion", "pull_requests")},
			required: []string{"check_run"},
			sample: obj{"check_run": obj{
				"id":           24511234567,
				"name":         "test (ubuntu-latest)",
				"node_id":      "CR_kwDOIsZL9s8AAAAFtP0Xxw",
				"head_sha":     syncSHA,
				"external_id":  "ca395085-040a-526b-2ce8-bdc85f692774",
				"url":          repoAPI + "/check-runs/24511234567",
				"html_url":     repoHTML + "/actions/runs/8921234567/job/24511234567",
				"details_url":  repoHTML + "/actions/runs/8921234567/job/24511234567",
				"status":       "completed",
				"conclusion":   "failure",
				"started_at":   "2024-05-02T09:40:41Z",
				"completed_at": "2024-05-02T09:44:02Z",
				"output": obj{
					"title":             "Process completed with exit code 1.",
					"summary":           "TestRetryBackoff/caps_at_five_minutes failed",
					"text":              nil,
					"annotations_count": 2,
					"annotations_url":   repoAPI + "/check-runs/24511234567/annotations",
				},
				"check_suite": obj{
					"id":          23311234567,
					"node_id":     "CS_kwDOIsZL9s8AAAAFbXUJBw",
					"head_branch": "retry-backoff",
					"head_sha":    syncSHA,
					"status":      "completed",
					"conclusion":  "failure",
					"url":         repoAPI + "/check-suites/23311234567",
					"before":      headSHA,
					"after":       syncSHA,
					"created_at":  "2024-05-02T09:40:30Z",
					"updated_at":  "2024-05-02T09:44:03Z",
				},
				"app":           actionsApp,
				"pull_requests": []obj{prLink},
			}},
		},
		{
			event: "workflow_run", action: "completed",
			label:       "Workflow run completed",
			description: "A GitHub Actions workflow run finished; workflow_run.conclusion says how, workflow_run.event what started it.",
			subject:     "a GitHub Actions workflow run", predicate: "completes",
			props: obj{
				"workflow_run": object(obj{
					"id":            integer(""),
					"name":          str("The workflow's name."),
					"head_branch":   orNull(str("")),
					"head_sha":      str(""),
					"path":          str("e.g. .github/workflows/ci.yml."),
					"display_title": str(""),
					"run_number":    integer(""),
					"run_attempt":   integer(""),
					"event":         str("What started the run, e.g. push or pull_request."),
					"status":        constant("completed", ""),
					"conclusion":    orNull(enum("", "success", "failure", "neutral", "cancelled", "timed_out", "action_required", "skipped", "stale", "startup_failure")),
					"html_url":      str(""),
					"actor":         userSchema,
					"pull_requests": arrayOf(prLinkSchema, ""),
				}, "id", "name", "head_sha", "event", "status", "conclusion"),
				"workflow": object(obj{"id": integer(""), "name": str(""), "path": str("")}, "id", "name"),
			},
			required: []string{"workflow_run", "workflow"},
			sample: obj{
				"workflow_run": obj{
					"id":                   8921234890,
					"name":                 "CI",
					"node_id":              "WFR_kwLOIsZL9s8AAAACE8XyBw",
					"head_branch":          "retry-backoff",
					"head_sha":             syncSHA,
					"path":                 ".github/workflows/ci.yml",
					"display_title":        prTitle,
					"run_number":           1312,
					"event":                "pull_request",
					"status":               "completed",
					"conclusion":           "success",
					"workflow_id":          41234567,
					"check_suite_id":       23311239876,
					"url":                  repoAPI + "/actions/runs/8921234890",
					"html_url":             repoHTML + "/actions/runs/8921234890",
					"pull_requests":        []obj{prLink},
					"created_at":           "2024-05-02T09:58:12Z",
					"updated_at":           "2024-05-02T10:03:40Z",
					"run_attempt":          2,
					"run_started_at":       "2024-05-02T09:58:12Z",
					"actor":                author,
					"triggering_actor":     author,
					"jobs_url":             repoAPI + "/actions/runs/8921234890/jobs",
					"logs_url":             repoAPI + "/actions/runs/8921234890/logs",
					"workflow_url":         repoAPI + "/actions/workflows/41234567",
					"head_commit":          obj{"id": syncSHA, "tree_id": pushTreeSHA, "message": "Cap the jitter too", "timestamp": "2024-05-02T11:40:19+02:00", "author": obj{"name": "Maria Lopez", "email": "mlopez@acme.dev"}, "committer": obj{"name": "Maria Lopez", "email": "mlopez@acme.dev"}},
					"repository":           obj{"id": 583431926, "node_id": "R_kgDOIsZL9g", "name": "widgets", "full_name": "acme/widgets", "private": true, "owner": acme, "html_url": repoHTML, "url": repoAPI},
					"head_repository":      obj{"id": 583431926, "node_id": "R_kgDOIsZL9g", "name": "widgets", "full_name": "acme/widgets", "private": true, "owner": acme, "html_url": repoHTML, "url": repoAPI},
					"previous_attempt_url": repoAPI + "/actions/runs/8921234890/attempts/1",
				},
				"workflow": obj{
					"id":         41234567,
					"node_id":    "W_kwDOIsZL9s4CdTFn",
					"name":       "CI",
					"path":       ".github/workflows/ci.yml",
					"state":      "active",
					"created_at": "2023-01-09T16:20:31Z",
					"updated_at": "2024-03-14T10:02:55Z",
					"url":        repoAPI + "/actions/workflows/41234567",
					"html_url":   repoHTML + "/blob/main/.github/workflows/ci.yml",
					"badge_url":  repoHTML + "/workflows/CI/badge.svg",
				},
			},
		},
		{
			event: "release", action: "published",
			label:       "Release published",
			description: "A release was published (or a draft release made public); release.prerelease marks pre-releases.",
			subject:     "a GitHub release is", predicate: "published",
			props: obj{"release": object(obj{
				"id":               integer(""),
				"tag_name":         str("e.g. v1.8.0."),
				"name":             orNull(str("")),
				"body":             orNull(str("Release notes in Markdown.")),
				"draft":            boolean(""),
				"prerelease":       boolean(""),
				"target_commitish": str("Branch or SHA the tag was created from."),
				"html_url":         str(""),
				"author":           userSchema,
				"published_at":     orNull(str("")),
				"assets":           arrayOf(object(obj{"name": str(""), "browser_download_url": str(""), "size": integer("")}, "name"), ""),
			}, "id", "tag_name", "draft", "prerelease", "html_url")},
			required: []string{"release"},
			sample: obj{"sender": reviewer, "release": obj{
				"url":              repoAPI + "/releases/154876321",
				"assets_url":       repoAPI + "/releases/154876321/assets",
				"upload_url":       "https://uploads.github.com/repos/acme/widgets/releases/154876321/assets{?name,label}",
				"html_url":         repoHTML + "/releases/tag/v1.8.0",
				"id":               154876321,
				"author":           reviewer,
				"node_id":          "RE_kwDOIsZL9s4JOz2h",
				"tag_name":         "v1.8.0",
				"target_commitish": "main",
				"name":             "v1.8.0",
				"draft":            false,
				"prerelease":       false,
				"created_at":       "2024-05-02T11:05:50Z",
				"published_at":     "2024-05-02T11:20:14Z",
				"assets": []obj{{
					"url":                  repoAPI + "/releases/assets/167021987",
					"id":                   167021987,
					"node_id":              "RA_kwDOIsZL9s4J9I2j",
					"name":                 "widgets_1.8.0_linux_amd64.tar.gz",
					"label":                "",
					"uploader":             reviewer,
					"content_type":         "application/gzip",
					"state":                "uploaded",
					"size":                 8123456,
					"download_count":       0,
					"created_at":           "2024-05-02T11:19:58Z",
					"updated_at":           "2024-05-02T11:20:01Z",
					"browser_download_url": repoHTML + "/releases/download/v1.8.0/widgets_1.8.0_linux_amd64.tar.gz",
				}},
				"tarball_url": repoAPI + "/tarball/v1.8.0",
				"zipball_url": repoAPI + "/zipball/v1.8.0",
				"body":        "## What's changed\n* " + prTitle + " by @mlopez in #482\n\n**Full changelog**: " + repoHTML + "/compare/v1.7.2...v1.8.0",
			}},
		},
		{
			event:       "ping",
			label:       "Webhook ping",
			description: "GitHub checks a newly created webhook; nothing happened in the repository.",
			subject:     "GitHub", predicate: "pings the webhook",
			hidden: true,
			props: obj{
				"zen":     str("A random GitHub aphorism."),
				"hook_id": integer(""),
				"hook":    object(obj{"id": integer(""), "type": str(""), "events": arrayOf(str(""), ""), "active": boolean("")}, "id"),
			},
			required: []string{"zen", "hook_id"},
			sample: obj{
				"zen":     "Design for failure.",
				"hook_id": 478231905,
				"hook": obj{
					"type":       "Repository",
					"id":         478231905,
					"name":       "web",
					"active":     true,
					"events":     []string{"pull_request", "push", "issue_comment"},
					"config":     obj{"content_type": "json", "insecure_ssl": "0", "url": "https://hangar.acme.dev/webhooks/github"},
					"updated_at": "2024-05-01T15:02:11Z",
					"created_at": "2024-05-01T15:02:11Z",
					"url":        repoAPI + "/hooks/478231905",
					"ping_url":   repoAPI + "/hooks/478231905/pings",
				},
			},
		},
		{
			event:       "status",
			label:       "Commit status",
			description: "A legacy commit status changed (older CI systems; GitHub Actions and newer apps report check runs instead).",
			subject:     "a GitHub commit status", predicate: "changes",
			hidden: true,
			props: obj{
				"sha":         str(""),
				"state":       enum("", "pending", "success", "failure", "error"),
				"context":     str("e.g. ci/jenkins."),
				"description": orNull(str("")),
				"target_url":  orNull(str("")),
				"branches":    arrayOf(object(obj{"name": str("")}, "name"), ""),
			},
			required: []string{"sha", "state", "context"},
			sample: obj{
				"id":          29123456789,
				"sha":         syncSHA,
				"name":        "acme/widgets",
				"target_url":  "https://ci.acme.dev/builds/9813",
				"context":     "ci/legacy",
				"description": "Build #9813 passed",
				"state":       "success",
				"commit":      obj{"sha": syncSHA, "html_url": repoHTML + "/commit/" + syncSHA, "url": repoAPI + "/commits/" + syncSHA},
				"branches":    []obj{{"name": "retry-backoff", "commit": obj{"sha": syncSHA, "url": repoAPI + "/commits/" + syncSHA}, "protected": false}},
				"created_at":  "2024-05-02T09:47:12Z",
				"updated_at":  "2024-05-02T09:47:12Z",
			},
		},
	}
	events := make([]Event, len(specs))
	for i, s := range specs {
		events[i] = s.render()
	}
	return events
}

var githubVariables = []Variable{
	{Path: "repository.full_name", Alias: "repo"},
	{Path: "sender.login", Alias: "actor"},
	{Path: "action", Alias: "action"},
	{Path: "pull_request.number", Alias: "pr_number"},
	{Path: "pull_request.title", Alias: "pr_title"},
	{Path: "pull_request.html_url", Alias: "pr_url"},
	{Path: "pull_request.head.ref", Alias: "head_branch"},
	{Path: "pull_request.head.sha", Alias: "head_sha"},
	{Path: "pull_request.base.ref", Alias: "base_branch"},
	{Path: "issue.number", Alias: "issue_number"},
	{Path: "comment.body", Alias: "comment_body"},
	{Path: "ref", Alias: "ref"},
	{Path: "after", Alias: "after_sha"},
	{Path: "installation.id", Alias: "installation_id"},
}
