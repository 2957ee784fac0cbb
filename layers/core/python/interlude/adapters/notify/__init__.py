"""People are asked (issue 14): notifications by e-mail (SES) and Slack, reminders and escalations."""
