// Owns the names of every real-time key and channel in the store; all of them start with the store prefix.
export function realtimeKeys(prefix: string) {
  const base = `${prefix}rt:`;
  return {
    channel: `${base}bus`,
    /** Sorted set: member instance id, score its last heartbeat (epoch ms). Listing never needs KEYS. */
    instances: `${base}instances`,
    instance: (id: string) => `${base}instance:${id}`,
    /** Prefix of instance records; Lua scripts append the id. */
    instanceBase: `${base}instance:`,
    /** Prefix of one instance's presence keys; Lua scripts append `<id>:<kind>`. */
    presenceBase: `${base}presence:`,
    online: (id: string) => `${base}presence:${id}:online`,
    members: (id: string) => `${base}presence:${id}:members`,
    admins: (id: string) => `${base}presence:${id}:admins`,
    guests: (id: string) => `${base}presence:${id}:guests`,
    presenceKeys(id: string): string[] {
      return [this.online(id), this.members(id), this.admins(id), this.guests(id)];
    },
  };
}

export type RealtimeKeys = ReturnType<typeof realtimeKeys>;
