package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newTasksCmd() *cobra.Command {
	return newClientGroup("tasks", "Create, list, show, retitle and delete tasks",
		newTasksCreateCmd, newTasksListCmd, newTasksGetCmd, newTasksUpdateCmd, newTasksDeleteCmd)
}

func newTasksCreateCmd(f *clientFlags) *cobra.Command {
	req := &appv1.CreateTaskRequest{}
	var promptFile string
	cmd := clientCmd(f, "create --profile ID [--prompt TEXT | --prompt-file FILE|-] [flags]",
		"Create a task, and its first session, from a profile", cobra.NoArgs,
		func(c *apiClient, cmd *cobra.Command, _ []string) error {
			req.Prompt, req.Title = optString(cmd, "prompt"), optString(cmd, "title")
			req.Harness, req.Model, req.Effort = optString(cmd, "harness"), optString(cmd, "model"), optString(cmd, "effort")
			req.HarnessMode, req.ModelRouter = optString(cmd, "harness-mode"), optString(cmd, "model-router")
			req.ParentTaskId = optString(cmd, "parent")
			if promptFile != "" {
				b, err := readInput(cmd, promptFile)
				if err != nil {
					return err
				}
				req.Prompt = proto.String(string(b))
			}
			return send(c, c.tasks.CreateTask, req, nil)
		})
	fl := cmd.Flags()
	fl.StringVar(&req.ProfileId, "profile", "", "the profile the task starts from (required)")
	fl.StringVar(&req.Type, "type", "agent", "task type")
	fl.String("prompt", "", "the first prompt")
	fl.StringVar(&promptFile, "prompt-file", "", "read the first prompt from `FILE`, or from standard input with -")
	fl.String("title", "", "task title")
	fl.String("harness", "", "harness (default: the profile's)")
	fl.String("model", "", "model (default: the profile's)")
	fl.String("effort", "", "effort level (default: the profile's)")
	fl.String("harness-mode", "", "harness mode")
	fl.String("model-router", "", "model router (default: the profile's)")
	fl.String("parent", "", "make the task a child of `TASK_ID`")
	fl.BoolVar(&req.DeferInitialPrompt, "defer-initial-prompt", false, "start the session without sending the prompt yet")
	_ = cmd.MarkFlagRequired("profile")
	cmd.MarkFlagsMutuallyExclusive("prompt", "prompt-file")
	return cmd
}

func newTasksListCmd(f *clientFlags) *cobra.Command {
	req := &appv1.ListTasksRequest{}
	cmd := clientCmd(f, "list [flags]", "List tasks", cobra.NoArgs, func(c *apiClient, cmd *cobra.Command, _ []string) error {
		if err := checkOneOf(cmd, "scope", "mine", "all"); err != nil {
			return err
		}
		if err := checkOneOf(cmd, "order", "newest", "oldest", "updated"); err != nil {
			return err
		}
		return send(c, c.tasks.ListTasks, req, func(w io.Writer, resp *appv1.ListTasksResponse) {
			table(w, []string{"ID", "STATUS", "TYPE", "NAME", "TITLE", "CREATED"}, resp.GetTasks(), func(t *appv1.Task) []string {
				name := t.GetCanonicalTaskName()
				if name == "" {
					name = t.GetLocalTaskName()
				}
				return []string{t.GetId(), t.GetStatus(), t.GetType(), name, truncate(t.GetTitle(), 40), t.GetCreatedAt()}
			})
			fmt.Fprintf(w, "total: %d\n", resp.GetTotalCount())
			if resp.GetSessionStateUnavailable() {
				fmt.Fprintln(w, "note: session state was unavailable; statuses may be stale")
			}
		})
	})
	fl := cmd.Flags()
	fl.StringVar(&req.Scope, "scope", "", "mine or all (default: the server's)")
	fl.StringVar(&req.Search, "search", "", "only tasks matching `TEXT`")
	fl.StringArrayVar(&req.States, "state", nil, "only tasks in state `S` (repeatable)")
	fl.StringArrayVar(&req.CreatedByUserIds, "created-by", nil, "only tasks created by user `UID` (repeatable)")
	fl.StringVar(&req.Order, "order", "", "newest, oldest or updated (default: the server's)")
	fl.Int32Var(&req.Page, "page", 0, "page `N` of the results")
	fl.Int32Var(&req.PageSize, "page-size", 0, "`N` tasks a page (default: the server's)")
	return cmd
}

func newTasksGetCmd(f *clientFlags) *cobra.Command {
	req := &appv1.GetTaskRequest{}
	cmd := clientCmd(f, "get ID | --session SESSION_ID", "Show a task, by its ID or by one of its sessions",
		cobra.MaximumNArgs(1), func(c *apiClient, _ *cobra.Command, args []string) error {
			if (len(args) == 1) == (req.SessionId != "") {
				return usageError("give a task ID or --session, not both")
			}
			if len(args) == 1 {
				req.TaskId = args[0]
			}
			return send(c, c.tasks.GetTask, req, nil)
		})
	cmd.Flags().StringVar(&req.SessionId, "session", "", "find the task by one of its sessions, `SESSION_ID`")
	return cmd
}

func newTasksUpdateCmd(f *clientFlags) *cobra.Command {
	var title string
	cmd := idCmd(f, "update ID --title TITLE", "Retitle a task", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.tasks.UpdateTask, &appv1.UpdateTaskRequest{TaskId: id, Title: &title}, nil)
	})
	cmd.Flags().StringVar(&title, "title", "", "the new title (required; \"\" resets it)")
	_ = cmd.MarkFlagRequired("title")
	return cmd
}

func newTasksDeleteCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "delete ID", "Delete a task", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.tasks.DeleteTask, &appv1.DeleteTaskRequest{TaskId: id}, func(w io.Writer, _ *emptypb.Empty) {
			fmt.Fprintf(w, "deleted task %s\n", id)
		})
	})
}
