DROP INDEX "notification_title_trgm_idx";--> statement-breakpoint
DROP INDEX "notification_content_trgm_idx";