DROP INDEX "chat_message_created_idx";--> statement-breakpoint
DROP INDEX "notification_user_created_idx";--> statement-breakpoint
DROP INDEX "notification_user_unread_idx";--> statement-breakpoint
DROP INDEX "notification_user_type_created_idx";--> statement-breakpoint
DROP INDEX "webhook_delivery_endpoint_created_idx";--> statement-breakpoint
CREATE INDEX "chat_message_created_desc_idx" ON "chat_message" USING btree ("created_at" DESC NULLS FIRST,"seq" DESC NULLS FIRST);--> statement-breakpoint
CREATE INDEX "notification_user_created_desc_idx" ON "notification" USING btree ("user_id","created_at" DESC NULLS FIRST,"id" DESC NULLS FIRST);--> statement-breakpoint
CREATE INDEX "notification_user_unread_desc_idx" ON "notification" USING btree ("user_id","created_at" DESC NULLS FIRST,"id" DESC NULLS FIRST) WHERE "notification"."read" = false;--> statement-breakpoint
CREATE INDEX "notification_user_type_created_desc_idx" ON "notification" USING btree ("user_id","type","created_at" DESC NULLS FIRST,"id" DESC NULLS FIRST,"read");--> statement-breakpoint
CREATE INDEX "webhook_delivery_endpoint_created_desc_idx" ON "webhook_delivery" USING btree ("endpoint_id","created_at" DESC NULLS FIRST,"id" DESC NULLS FIRST);