/** Whether DATABASE_URL (or a URL like it) names PostgreSQL. Apart from db.ts so that reading the settings loads no database driver. */
export const isPostgresUrl = (url: string | undefined): url is string => url !== undefined && /^postgres(ql)?:/i.test(url);
